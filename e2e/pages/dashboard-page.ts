import { expect, type Locator, type Page } from "@playwright/test";

/** /dashboard as an administrator sees it: found by roles and labels only. */
export class DashboardPage {
  readonly signInHeading: Locator;
  readonly token: Locator;
  readonly signInButton: Locator;
  readonly signOutButton: Locator;
  readonly nav: Locator;

  constructor(readonly page: Page) {
    this.signInHeading = page.getByRole("heading", { name: "Administrator sign-in" });
    this.token = page.getByLabel("Administrator token");
    this.signInButton = page.getByRole("button", { name: "Sign in" });
    this.signOutButton = page.getByRole("button", { name: "Sign out" });
    this.nav = page.getByRole("navigation", { name: "Dashboard" });
  }

  async goto(path = "/dashboard") {
    await this.page.goto(path);
  }

  async signIn(token: string) {
    await this.token.fill(token);
    await this.signInButton.click();
    await expect(this.signOutButton).toBeVisible();
  }

  async signOut() {
    await this.signOutButton.click();
    await expect(this.signInHeading).toBeVisible();
  }

  async openRequests() {
    await this.nav.getByRole("link", { name: "Requests" }).click();
    await expect(this.page.getByRole("heading", { name: "Requests", level: 1 })).toBeVisible();
  }

  async searchRequests(text: string) {
    await this.page.getByLabel("Search").fill(text);
    await this.page.getByRole("button", { name: "Apply" }).click();
  }

  requestsTable(): Locator {
    return this.page.getByRole("table").filter({ has: this.page.getByRole("columnheader", { name: "Transaction" }) });
  }

  async openWallets() {
    await this.nav.getByRole("link", { name: "Wallets" }).click();
    await expect(this.page.getByRole("heading", { name: "Wallets", level: 1 })).toBeVisible();
  }

  async lookUpWallet(address: string) {
    await this.page.getByRole("searchbox", { name: "Wallet address" }).fill(address);
    await this.page.getByRole("button", { name: "Look up" }).click();
    await expect(this.page.getByRole("region", { name: "Wallet", exact: true })).toBeVisible();
  }

  async blockWallet(reason: string) {
    await this.page.getByLabel("Reason for blocking").fill(reason);
    await this.page.getByRole("button", { name: "Block wallet" }).click();
  }

  walletState(): Locator {
    return this.page.getByTestId("wallet-state");
  }
}
