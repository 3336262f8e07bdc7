import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { expect, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { E2E } from "./stack";

/** Helpers shared by the browser specs: fresh wallets, API shortcuts for set-up, screenshots. */

export const ARTIFACTS_DIR = path.resolve(import.meta.dirname, "artifacts");

/** A wallet no test has used: 20 random bytes, mixed case as users paste them. */
export function freshAddress(): string {
  const hex = randomBytes(20).toString("hex");
  return `0x${[...hex].map((c, i) => (i % 3 === 0 ? c.toUpperCase() : c)).join("")}`;
}

export const VIEWPORTS = {
  desktop: { width: 1280, height: 900 },
  phone: { width: 390, height: 844 },
} as const;

/** A full-page screenshot in e2e/artifacts/ (gitignored; CI keeps it as a run artifact). */
export async function saveScreenshot(page: Page, name: string): Promise<string> {
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  const file = path.join(ARTIFACTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

type SponsorshipView = { id: string; status: string; requestedAt: string; relayTransactions: { transactionHash: string | null; status: string }[] };

/**
 * Set-up through the public API (the same endpoints the page uses): register, request, wait for completed.
 * Returns the request and its confirmed transaction hash.
 */
export async function sponsorThroughApi(request: APIRequestContext, address: string): Promise<{ id: string; hash: string; view: SponsorshipView }> {
  const registered = await request.post("/wallets/register", { data: { walletAddress: address } });
  expect([200, 201]).toContain(registered.status());
  const created = await request.post("/sponsorship/request", { data: { walletAddress: address } });
  expect(created.status(), await created.text()).toBe(201);
  const { id } = (await created.json()) as { id: string };
  let view: SponsorshipView | undefined;
  await expect
    .poll(
      async () => {
        view = (await (await request.get(`/sponsorship/${id}`)).json()) as SponsorshipView;
        return view.status;
      },
      { timeout: 60_000, intervals: [500] },
    )
    .toBe("completed");
  const hash = view!.relayTransactions.find((r) => r.status === "confirmed")?.transactionHash;
  expect(hash).toMatch(/^0x[0-9a-f]{64}$/);
  return { id, hash: hash!, view: view! };
}

/** An administrator's session on the API request context (its cookie jar keeps the session cookie). */
export async function signInApi(api: APIRequestContext): Promise<void> {
  expect((await api.post("/admin/sign-in", { data: { token: E2E.adminToken } })).status()).toBe(200);
}

/** The rendered height of a visible control, in CSS pixels (touch targets are at least 44). */
export async function heightOf(control: Locator): Promise<number> {
  await expect(control).toBeVisible();
  return (await control.boundingBox())!.height;
}

/** Opens /request until its summary shows the faucet `state`: GET /faucet is a snapshot of the chain reads, a few seconds old. */
export async function openRequestShowingFaucet(page: Page, state: string): Promise<void> {
  await expect(async () => {
    await page.goto("/request");
    await expect(page.getByTestId("faucet-state")).toHaveText(state, { timeout: 2_000 });
  }).toPass({ timeout: 30_000 });
}
