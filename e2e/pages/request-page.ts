import { expect, type Locator, type Page } from "@playwright/test";

/** /request as a user sees it: found by roles and labels only. */
export class RequestPage {
  readonly address: Locator;
  readonly submit: Locator;
  readonly connectWallet: Locator;
  readonly progress: Locator;
  readonly timeline: Locator;
  readonly status: Locator;
  readonly transaction: Locator;
  readonly refusal: Locator;
  readonly copyHash: Locator;

  constructor(readonly page: Page) {
    this.address = page.getByLabel("Wallet address");
    this.submit = page.getByRole("button", { name: "Request gas" });
    this.connectWallet = page.getByRole("button", { name: "Connect browser wallet" });
    this.progress = page.getByRole("region", { name: "Your request" });
    this.timeline = page.getByRole("list", { name: "Progress of the request" });
    this.status = page.getByTestId("request-status");
    this.transaction = page.getByTestId("transaction-hash");
    this.refusal = page.getByRole("alert").filter({ has: page.getByRole("heading") });
    this.copyHash = this.transaction.getByRole("button", { name: /^(Copy hash|Copied)$/ });
  }

  async goto(id?: string) {
    await this.page.goto(id ? `/request?id=${id}` : "/request");
    await expect(this.address).toBeVisible();
  }

  async requestFor(address: string) {
    await this.address.fill(address);
    await this.submit.click();
  }

  /** The field's hint or error, tied to it by aria-describedby. */
  async fieldMessage(): Promise<string> {
    const id = await this.address.getAttribute("aria-describedby");
    return (await this.page.locator(`[id="${id}"]`).innerText()).trim();
  }

  step(label: string): Locator {
    return this.timeline.getByRole("listitem").filter({ hasText: label });
  }

  async waitForStatus(status: string, timeout = 60_000) {
    await expect(this.status).toHaveText(`Status: ${status}`, { timeout });
  }

  /** The request id the page put in its URL. */
  requestIdFromUrl(): string | null {
    return new URL(this.page.url()).searchParams.get("id");
  }

  refusalTitled(title: string | RegExp): Locator {
    return this.page.getByRole("alert").getByRole("heading", { name: title });
  }
}
