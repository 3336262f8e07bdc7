import { readFileSync } from "node:fs";
import path from "node:path";
import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "@playwright/test";
import { DashboardPage } from "./pages/dashboard-page";
import { RequestPage } from "./pages/request-page";
import { E2E } from "./stack";
import { freshAddress, openRequestShowingFaucet, signInApi, sponsorThroughApi, VIEWPORTS } from "./support";

/**
 * axe (WCAG 2.x A and AA rules) finds no violation on /request, in every state a user meets (empty, in progress,
 * completed, refused, the faucet not operating), and on the dashboard's pages, at desktop and phone width.
 */

async function expectNoAxeViolation(page: Page, what: string) {
  const { violations } = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]).analyze();
  expect(
    violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`),
    what,
  ).toEqual([]);
}

for (const [name, viewport] of Object.entries(VIEWPORTS)) {
  test.describe(`axe at ${name} width`, () => {
    test.use({ viewport });

    test("/request, with the faucet's status loaded", async ({ page }) => {
      await page.goto("/request");
      await expect(page.getByTestId("faucet-state")).not.toHaveText("…");
      await expectNoAxeViolation(page, "/request");
    });

    test("the dashboard's sign-in and every page of the signed-in dashboard", async ({ page }) => {
      const dashboard = new DashboardPage(page);
      await dashboard.goto();
      await expect(dashboard.signInHeading).toBeVisible();
      await expectNoAxeViolation(page, "/dashboard (sign-in)");
      await dashboard.signIn(E2E.adminToken);
      for (const path of ["/dashboard", "/dashboard/requests", "/dashboard/wallets", "/dashboard/controls", "/dashboard/webhooks"]) {
        await page.goto(path);
        await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
        await expectNoAxeViolation(page, path);
        await expectTouchTargets(page, path);
      }
      // The webhooks page with a delivery in its table (the e2e stack's endpoint refuses connections: it waits, with an error).
      await page.getByRole("button", { name: "Send a test event" }).click();
      await expect(page.getByRole("status").filter({ hasText: "queued" })).toBeVisible();
      await expect(page.getByRole("table").first()).toBeVisible();
      // The endpoint by its origin only: its path (WEBHOOK_URLS http://127.0.0.1:9/e2e-webhooks) may be its token.
      await expect(page.getByRole("heading", { name: "http://127.0.0.1:9/[redacted]" })).toBeVisible();
      await expect(page.getByText("e2e-webhooks")).toHaveCount(0);
      // Nor anywhere in the page's HTML, its inline RSC payload included (a React key carried the whole URL there).
      expect(await page.content()).not.toContain("e2e-webhooks");
      await expectNoAxeViolation(page, "/dashboard/webhooks with a delivery");
    });
  });
}

/**
 * Touch targets are at least 44 px high (docs/ui.md): every visible button, buttons styled as links included.
 * Checked beside axe, whose WCAG 2.1 AA rules do not measure targets.
 */
async function expectTouchTargets(page: Page, what: string) {
  const short = await page.getByRole("button").evaluateAll((buttons) =>
    buttons
      .map((b) => ({ name: (b.textContent ?? "").trim() || (b.getAttribute("aria-label") ?? ""), height: b.getBoundingClientRect().height }))
      .filter((b) => b.height > 0 && b.height < 44)
      .map((b) => `${b.name}: ${b.height} px`),
  );
  expect(short, what).toEqual([]);
}

/** axe over the page as it is, at each width in turn (the state stays: only the viewport changes). */
async function expectNoAxeViolationAtEveryWidth(page: Page, what: string) {
  for (const [name, viewport] of Object.entries(VIEWPORTS)) {
    await page.setViewportSize(viewport);
    await expectNoAxeViolation(page, `${what} at ${name} width`);
  }
}

test.describe("axe on /request in every state", () => {
  test("a request in progress (the worker held, so it stays pending)", async ({ page, request: api }) => {
    // npm start records the worker's pid: SIGSTOP holds the pipeline, SIGCONT lets it go whatever happens.
    const processes = JSON.parse(readFileSync(path.join(E2E.dataDir, "processes.json"), "utf8")) as { worker?: number };
    // npm start always records it: a missing pid is a failure, not a reason to skip.
    expect(processes.worker, "the stack's worker pid in processes.json").toBeGreaterThan(0);
    const address = freshAddress();
    process.kill(processes.worker!, "SIGSTOP");
    try {
      expect((await api.post("/wallets/register", { data: { walletAddress: address } })).ok()).toBe(true);
      const created = await api.post("/sponsorship/request", { data: { walletAddress: address } });
      expect(created.status()).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const request = new RequestPage(page);
      await request.goto(id);
      await request.waitForStatus("Pending", 15_000);
      await expect(request.step("Received")).toContainText("in progress");
      await expectNoAxeViolationAtEveryWidth(page, "/request, a request in progress");
    } finally {
      process.kill(processes.worker!, "SIGCONT");
    }
  });

  test("a completed request, with its transaction hash and its links", async ({ page, request: api }) => {
    const { id, hash } = await sponsorThroughApi(api, freshAddress());
    const request = new RequestPage(page);
    await request.goto(id);
    await request.waitForStatus("Completed", 15_000);
    await expect(request.transaction).toContainText(hash);
    await expect(request.copyHash).toBeVisible();
    await expectNoAxeViolationAtEveryWidth(page, "/request, a completed request");
    await expectTouchTargets(page, "/request, a completed request");
  });

  test("a refused request (a wallet blocked by an administrator)", async ({ page, request: api }) => {
    const address = freshAddress();
    expect((await api.post("/wallets/register", { data: { walletAddress: address } })).ok()).toBe(true);
    await signInApi(api);
    expect((await api.post(`/admin/wallets/${address}/block`, { data: { reason: "axe check of the refusal" } })).ok()).toBe(true);
    const request = new RequestPage(page);
    await request.goto();
    await request.requestFor(address);
    await expect(request.refusalTitled("This wallet is blocked")).toBeVisible();
    await expectNoAxeViolationAtEveryWidth(page, "/request, a refusal");
  });

  test("the faucet not operating (sponsorships paused): the form disabled, the reason and a countdown", async ({ page, request: api }) => {
    await signInApi(api);
    expect((await api.post("/admin/pause", { data: { reason: "axe check of the paused page" } })).ok()).toBe(true);
    try {
      await openRequestShowingFaucet(page, "Paused");
      await expect(page.getByRole("button", { name: "Request gas" })).toBeDisabled();
      await expect(page.getByTestId("retry-countdown")).toBeVisible();
      await expectNoAxeViolationAtEveryWidth(page, "/request, the faucet paused");
    } finally {
      expect((await api.post("/admin/resume", { data: { reason: "axe check done" } })).ok()).toBe(true);
    }
    await openRequestShowingFaucet(page, "Operating");
  });
});

test("the check itself finds a violation (an image without a text alternative), so a silent axe cannot pass it", async ({ page }) => {
  await page.goto("/request");
  // After hydration (React could otherwise drop a node it did not render), and checked to be there.
  await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
  await page.waitForLoadState("networkidle");
  await page.evaluate(() => document.body.append(Object.assign(document.createElement("img"), { id: "axe-self-check", src: "data:," })));
  await expect(page.locator("#axe-self-check")).toHaveCount(1);
  const { violations } = await new AxeBuilder({ page }).withTags(["wcag2a"]).analyze();
  expect(violations.map((v) => v.id)).toContain("image-alt");
});
