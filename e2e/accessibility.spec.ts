import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Page } from "@playwright/test";
import { DashboardPage } from "./pages/dashboard-page";
import { E2E } from "./stack";
import { VIEWPORTS } from "./support";

/** axe (WCAG 2.x A and AA rules) finds no violation on /request and the dashboard's pages, at desktop and phone width. */

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
      for (const path of ["/dashboard", "/dashboard/requests", "/dashboard/wallets", "/dashboard/controls"]) {
        await page.goto(path);
        await expect(page.getByRole("heading", { level: 1 })).toBeVisible();
        await expectNoAxeViolation(page, path);
      }
    });
  });
}

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
