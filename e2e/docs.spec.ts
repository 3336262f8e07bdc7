import { expect, test } from "@playwright/test";
import { E2E } from "./stack";
import { saveScreenshot, VIEWPORTS } from "./support";

/**
 * /docs in Chromium: Scalar's API reference renders the served /openapi.json from this server alone (no CDN, no
 * font host: nothing leaves the origin) and under the web server's CSP (scripts by nonce only), and the pages link
 * to it.
 */

test.describe("the API reference at /docs", () => {
  for (const [name, viewport] of Object.entries(VIEWPORTS)) {
    test(`renders the document's operations from this server only, under the nonce-only script policy (${name})`, async ({ page }) => {
      await page.setViewportSize(viewport);
      const foreign: string[] = [];
      const refused: string[] = [];
      page.on("request", (r) => {
        const url = r.url();
        if (!url.startsWith(E2E.baseURL) && !url.startsWith("data:") && !url.startsWith("blob:")) foreign.push(url);
      });
      page.on("console", (m) => {
        if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
      });
      const response = await page.goto("/docs");
      expect(response?.status()).toBe(200);
      // The web server's policy: scripts only by nonce (no 'unsafe-inline', no host but this one).
      const policy = response?.headers()["content-security-policy"] ?? "";
      expect(policy).toMatch(/script-src 'self' 'nonce-[^']+' 'strict-dynamic'/);
      expect(policy).not.toMatch(/script-src[^;]*unsafe-inline/);

      await expect(page.getByRole("heading", { name: "Gas sponsorship service", level: 1 })).toBeVisible();
      await expect(page.getByText("Request a sponsorship for a registered wallet").first()).toBeAttached();
      await expect(page.getByText("/sponsorship/request").first()).toBeAttached();
      await saveScreenshot(page, `docs-${name}`);
      expect(foreign).toEqual([]);
      expect(refused).toEqual([]);
    });
  }

  test("is linked from /request's footer, the dashboard and the home page", async ({ page }) => {
    for (const path of ["/request", "/dashboard", "/"]) {
      await page.goto(path);
      await expect(page.getByRole("link", { name: "API reference" }), path).toHaveAttribute("href", "/docs");
    }
  });
});
