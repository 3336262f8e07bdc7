import { expect, test, type APIRequestContext } from "@playwright/test";
import { DashboardPage } from "./pages/dashboard-page";
import { RequestPage } from "./pages/request-page";
import { E2E } from "./stack";
import { freshAddress, heightOf, saveScreenshot, sponsorThroughApi, VIEWPORTS } from "./support";

/** /dashboard in Debian's Chromium against `npm start`'s real stack. */

/** The height of a control as laid out: touch targets are at least 44 px high (docs/ui.md). */
/**
 * Puts a fresh wallet over its hourly limit through the public API (5 requests an hour per wallet, refusals
 * counted; the e2e stack keeps that default): the request over the limit is refused 429 and starts a 15-minute
 * automatic block. Returns the wallet.
 */
async function walletUnderAutomaticBlock(api: APIRequestContext): Promise<string> {
  const wallet = freshAddress();
  expect((await api.post("/wallets/register", { data: { walletAddress: wallet } })).status()).toBe(201);
  const created = await api.post("/sponsorship/request", { data: { walletAddress: wallet } });
  expect(created.status()).toBe(201);
  // Within the replay window the same request is answered again and counts nothing: wait it out.
  const { requestedAt } = (await created.json()) as { requestedAt: string };
  await expect.poll(() => Date.now() - Date.parse(requestedAt), { timeout: 10_000 }).toBeGreaterThan(E2E.replayWindowMs + 500);
  let status = 0;
  for (let attempt = 0; attempt < 8 && status !== 429; attempt++) {
    status = (await api.post("/sponsorship/request", { data: { walletAddress: wallet } })).status();
  }
  expect(status).toBe(429);
  return wallet;
}

test.describe("the dashboard without a session", () => {
  test("shows only the sign-in form and exposes no data", async ({ page, request: api }) => {
    const wallet = freshAddress();
    const { id, hash } = await sponsorThroughApi(api, wallet);
    const dashboard = new DashboardPage(page);
    // What only the database knows must not reach the page: the wallet behind the id, the hash behind the wallet.
    const pages: [string, string[]][] = [
      ["/dashboard", [wallet.toLowerCase(), hash, id]],
      ["/dashboard/requests", [wallet.toLowerCase(), hash, id]],
      [`/dashboard/requests/${id}`, [wallet.toLowerCase(), hash]],
      [`/dashboard/requests?q=${hash}`, [wallet.toLowerCase(), id]],
      [`/dashboard/wallets?address=${wallet}`, [hash, id]],
    ];
    for (const [path, secrets] of pages) {
      await dashboard.goto(path);
      await expect(dashboard.signInHeading, path).toBeVisible();
      await expect(dashboard.nav).toHaveCount(0);
      await expect(page.getByRole("table")).toHaveCount(0);
      const html = (await page.content()).toLowerCase();
      for (const secret of secrets) expect(html, `${path} leaks ${secret}`).not.toContain(secret.toLowerCase());
    }
  });

  test("its admin routes answer 401 problem+json", async ({ request: api }) => {
    const wallet = freshAddress().toLowerCase();
    const calls = [
      api.get("/admin/session"),
      api.get("/admin/overview"),
      api.get("/admin/requests"),
      api.get(`/admin/requests/00000000-0000-4000-8000-000000000000`),
      api.get(`/admin/wallets/${wallet}`),
      api.post(`/admin/wallets/${wallet}/block`, { data: { reason: "no session" } }),
      api.post(`/admin/wallets/${wallet}/unblock`, { data: { reason: "no session" } }),
      api.post("/admin/sign-out"),
    ];
    for (const response of await Promise.all(calls)) {
      expect(response.status(), response.url()).toBe(401);
      expect(response.headers()["content-type"]).toBe("application/problem+json");
      expect(await response.json()).toMatchObject({ status: 401, code: "unauthorized" });
    }
    // Nothing was blocked by the refused call.
    const registered = await api.post("/wallets/register", { data: { walletAddress: wallet } });
    expect((await registered.json()).isBlocked).toBe(false);
  });

  test("refuses a wrong token", async ({ page }) => {
    const dashboard = new DashboardPage(page);
    await dashboard.goto();
    await dashboard.token.fill("not-the-token-0000000000");
    await dashboard.signInButton.click();
    await expect(page.getByRole("alert").filter({ hasText: "That token is not right." })).toBeVisible();
    await expect(dashboard.signOutButton).toHaveCount(0);
  });
});

test.describe("an administrator", () => {
  test("signs in, finds a request by its hash, blocks another wallet, and /request refuses that wallet", async ({ page, request: api, context }) => {
    const { id, hash } = await sponsorThroughApi(api, freshAddress());
    const dashboard = new DashboardPage(page);
    await page.setViewportSize(VIEWPORTS.desktop);
    await dashboard.goto();
    await expect(dashboard.signInHeading).toBeVisible();
    await dashboard.signIn(E2E.adminToken);

    // The session cookie: HttpOnly, SameSite=Strict.
    const cookie = (await context.cookies()).find((c) => c.name === "admin_session");
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });

    // Overview.
    await expect(page.getByRole("heading", { name: "Overview", level: 1 })).toBeVisible();
    for (const section of [
      "Requests by status",
      "Time from request to completed",
      "Queue depth per stage",
      "Worker heartbeat",
      "Treasury",
      "Relayer accounts",
    ]) {
      await expect(page.getByRole("heading", { name: section, level: 2 })).toBeVisible();
    }
    await expect(page.getByRole("img", { name: /Completed and failed requests per/ })).toBeVisible();
    await expect(page.getByRole("region", { name: "Treasury", exact: true })).toContainText("Sponsorships it still covers");
    await expect(page.getByRole("region", { name: "Worker heartbeat", exact: true })).toContainText("alive");
    expect(await heightOf(page.getByRole("button", { name: "Pause", exact: true })), "the auto-refresh's Pause").toBeGreaterThanOrEqual(44);
    await saveScreenshot(page, "dashboard-desktop");
    await page.setViewportSize(VIEWPORTS.phone);
    await page.reload();
    await expect(page.getByRole("heading", { name: "Overview", level: 1 })).toBeVisible();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await saveScreenshot(page, "dashboard-phone");
    await page.setViewportSize(VIEWPORTS.desktop);

    // Requests: search by the transaction hash (any case), open the detail.
    await dashboard.openRequests();
    await dashboard.searchRequests(hash.toUpperCase().replace("0X", "0x"));
    const table = dashboard.requestsTable();
    await expect(table.getByRole("row")).toHaveCount(2); // header + the one request
    await table.getByRole("link", { name: `Request ${id}` }).click();
    await expect(page.getByRole("heading", { level: 1 })).toContainText(id);
    await expect(page.getByRole("region", { name: "Relay attempts (1)", exact: true })).toContainText(hash);
    const audit = page.getByRole("region", { name: "Audit trail", exact: true });
    for (const change of ["created as pending", "pending → approved", "approved → relayed", "relayed → completed"]) {
      await expect(audit.getByRole("cell", { name: change })).toBeVisible();
    }

    // Wallets: block a fresh wallet with a reason.
    const blocked = freshAddress();
    await dashboard.openWallets();
    await dashboard.lookUpWallet(blocked);
    await expect(dashboard.walletState()).toHaveText("Not blocked");
    await dashboard.blockWallet("e2e: abuse report");
    await expect(dashboard.walletState()).toHaveText("Blocked");
    await expect(page.getByRole("status").filter({ hasText: "Wallet blocked." })).toBeVisible();
    const history = page.getByRole("region", { name: "Block history", exact: true });
    await expect(history.getByRole("cell", { name: "e2e: abuse report" })).toBeVisible();
    await expect(page.getByRole("region", { name: "Administrator actions", exact: true })).toContainText("block wallet — e2e: abuse report");

    // That wallet's request on /request is refused with the blocked message.
    const requestPage = new RequestPage(await context.newPage());
    await requestPage.goto();
    // The HttpOnly session cookie is sent to /request too: its value must never be written into the page.
    const requestHtml = await (await context.request.get("/request")).text();
    expect(requestHtml).toContain("Get gas for a new wallet");
    expect(requestHtml).not.toContain(cookie!.value);
    expect(await requestPage.page.content()).not.toContain(cookie!.value);
    await requestPage.requestFor(blocked);
    await expect(requestPage.refusalTitled("This wallet is blocked")).toBeVisible();
    await requestPage.page.close();

    // Sign out: the session ends on the server too; the old cookie opens nothing any more.
    expect((await api.get("/admin/session", { headers: { cookie: `admin_session=${cookie!.value}` } })).status()).toBe(200);
    await dashboard.signOut();
    expect((await api.get("/admin/session", { headers: { cookie: `admin_session=${cookie!.value}` } })).status()).toBe(401);
  });
});

test.describe("an administrator at the controls", () => {
  test("pauses sponsorships with a reason (the API refuses, /health names it), resumes, and blocks then lifts an address range", async ({
    page,
    request: api,
  }) => {
    const dashboard = new DashboardPage(page);
    await page.setViewportSize(VIEWPORTS.desktop);
    await dashboard.goto("/dashboard/controls");
    await dashboard.signIn(E2E.adminToken);
    await expect(page.getByRole("heading", { name: "Controls", level: 1 })).toBeVisible();
    const sponsorships = page.getByRole("region", { name: "Sponsorships", exact: true });
    await expect(sponsorships).toContainText("Running");

    const wallet = freshAddress();
    expect((await api.post("/wallets/register", { data: { walletAddress: wallet } })).status()).toBe(201);
    try {
      await sponsorships.getByLabel("Reason for pausing (shown on /health)").fill("e2e: treasury refill");
      await sponsorships.getByRole("button", { name: "Pause sponsorships" }).click();
      await expect(sponsorships.getByRole("status").filter({ hasText: "Sponsorships paused." })).toBeVisible();
      await expect(sponsorships).toContainText("e2e: treasury refill");
      const refused = await api.post("/sponsorship/request", { data: { walletAddress: wallet } });
      expect(refused.status()).toBe(503);
      expect(await refused.json()).toMatchObject({ code: "sponsorships_paused" });
      expect((await (await api.get("/health")).json()).checks.sponsorships).toMatchObject({ status: "degraded", reason: "e2e: treasury refill" });

      await sponsorships.getByRole("button", { name: "Resume sponsorships" }).click();
      await expect(sponsorships.getByRole("status").filter({ hasText: "Sponsorships resumed." })).toBeVisible();
      await expect(sponsorships).toContainText("Running");
    } finally {
      await api.post("/admin/resume", { data: {}, headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ") } });
    }
    expect((await api.post("/sponsorship/request", { data: { walletAddress: wallet } })).status()).toBe(201);

    // Two address ranges: listed with their reasons, then lifted.
    const blocks = page.getByRole("region", { name: "IP blocks", exact: true });
    for (const [cidr, listed, reason] of [
      ["198.51.100.77/24", "198.51.100.0/24", "e2e: a farm"],
      ["203.0.113.0/24", "203.0.113.0/24", "e2e: another farm"],
    ] as const) {
      await blocks.getByLabel("Address or prefix").fill(cidr);
      await blocks.getByLabel("Reason", { exact: true }).fill(reason);
      await blocks.getByRole("button", { name: "Block", exact: true }).click();
      await expect(blocks.getByRole("status").filter({ hasText: `Blocked ${listed}.` })).toBeVisible();
    }
    const table = blocks.getByRole("region", { name: "Active IP blocks (table)" });
    await expect(table.getByRole("row").filter({ hasText: "198.51.100.0/24" })).toContainText("e2e: a farm");
    // Found by an address it holds (older blocks than the newest 500 are found so too), then the whole list again.
    await blocks.getByLabel("Find blocks for an IP or range").fill("198.51.100.9");
    await blocks.getByRole("button", { name: "Find", exact: true }).click();
    await expect(page.getByTestId("ip-blocks-shown")).toHaveText("1 active block holds or lies within 198.51.100.9/32.");
    await expect(table.getByRole("row").filter({ hasText: "203.0.113.0/24" })).toHaveCount(0);
    await expect(table.getByRole("row").filter({ hasText: "198.51.100.0/24" })).toHaveCount(1);
    await blocks.getByLabel("Find blocks for an IP or range").fill("");
    await blocks.getByRole("button", { name: "Find", exact: true }).click();
    await expect(table.getByRole("row").filter({ hasText: "203.0.113.0/24" })).toHaveCount(1);
    // Lifting removes the row, its button with it: the outcome is said in the section's status line (the form's
    // "Blocked …" is no longer true of the list, so it goes), and focus moves to the Lift button left...
    await table.getByRole("button", { name: "Lift the block of 198.51.100.0/24" }).click();
    await expect(blocks.getByRole("status").filter({ hasText: "198.51.100.0/24: Block lifted." })).toBeVisible();
    await expect(table.getByRole("row").filter({ hasText: "198.51.100.0/24" })).toHaveCount(0);
    await expect(blocks.getByRole("status").filter({ hasText: /Blocked / })).toHaveCount(0);
    await expect(table.getByRole("button", { name: "Lift the block of 203.0.113.0/24" })).toBeFocused();
    // ...and after the last one, to the section's heading.
    await page.keyboard.press("Enter");
    await expect(blocks.getByRole("status").filter({ hasText: "203.0.113.0/24: Block lifted." })).toBeVisible();
    await expect(blocks).toContainText("No address or range is blocked.");
    await expect(blocks.getByRole("heading", { name: "IP blocks" })).toBeFocused();
  });
});

test.describe("an administrator on the wallets page", () => {
  test("gives a wallet under an automatic (rate-limit) block an administrator's block too, and lifts an automatic block alone", async ({
    page,
    request: api,
  }) => {
    const wallet = await walletUnderAutomaticBlock(api);
    const dashboard = new DashboardPage(page);
    await dashboard.goto("/dashboard/wallets");
    await dashboard.signIn(E2E.adminToken);
    await dashboard.lookUpWallet(wallet);
    const summary = page.getByRole("region", { name: "Wallet", exact: true });
    await expect(dashboard.walletState()).toHaveText("Blocked");
    await expect(summary).toContainText("Automatic block");
    await expect(summary).not.toContainText("Blocked by an administrator");

    // An automatic block ends by itself in 15 minutes: it does not stand in for an administrator's block.
    await dashboard.blockWallet("e2e: abuse report on a rate-limited wallet");
    await expect(page.getByRole("status").filter({ hasText: "Wallet blocked." })).toBeVisible();
    await expect(summary).toContainText("Blocked by an administrator");
    await expect(summary).toContainText("Automatic block");
    // With an administrator's block active only lifting is offered, and it lifts every block.
    await expect(page.getByRole("button", { name: "Block wallet", exact: true })).toHaveCount(0);
    await page.getByLabel("Reason for unblocking").fill("e2e: resolved");
    await page.getByRole("button", { name: "Unblock wallet", exact: true }).click();
    await expect(page.getByRole("status").filter({ hasText: "Wallet unblocked." })).toBeVisible();
    await expect(dashboard.walletState()).toHaveText("Not blocked");

    // The wallet's hour is still full: its next request starts a new automatic block, which can be lifted alone.
    expect((await api.post("/sponsorship/request", { data: { walletAddress: wallet } })).status()).toBe(429);
    await page.reload();
    await expect(dashboard.walletState()).toHaveText("Blocked");
    await expect(summary).not.toContainText("Blocked by an administrator");
    await page.getByLabel("Reason for blocking").fill("e2e: a false alarm");
    await page.getByRole("button", { name: "Lift the automatic block" }).click();
    await expect(page.getByRole("status").filter({ hasText: "Wallet unblocked." })).toBeVisible();
    await expect(dashboard.walletState()).toHaveText("Not blocked");
    // The button pressed is gone with the block: focus is on the form's heading, not lost.
    await expect(page.getByRole("heading", { name: "Block this wallet" })).toBeFocused();
  });
});
