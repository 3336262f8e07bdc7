import { rmSync } from "node:fs";
import { defineConfig, devices } from "@playwright/test";
import { E2E } from "./e2e/stack";

// A fresh stack for every run: the e2e data directory is wiped once, in the main process.
if (!process.env.E2E_STACK_PREPARED) {
  rmSync(E2E.dataDir, { recursive: true, force: true });
  process.env.E2E_STACK_PREPARED = "1";
}

const chromiumArgs = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

export default defineConfig({
  testDir: "./e2e",
  outputDir: "./test-results/playwright-output",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  timeout: 90_000,
  expect: { timeout: 30_000 },
  reporter: [["list"], ["html", { open: "never", outputFolder: "playwright-report" }], ["json", { outputFile: "test-results/playwright.json" }]],
  use: {
    baseURL: E2E.baseURL,
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
  },
  projects: [
    { name: "api", testMatch: /api\.spec\.ts$/ },
    {
      name: "chromium",
      testIgnore: /api\.spec\.ts$/,
      use: {
        ...devices["Desktop Chrome"],
        launchOptions: { executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", args: chromiumArgs },
      },
    },
  ],
  webServer: {
    command: "npm start",
    url: `${E2E.baseURL}/health`,
    timeout: 180_000,
    reuseExistingServer: false,
    stdout: "pipe",
    stderr: "pipe",
    gracefulShutdown: { signal: "SIGTERM", timeout: 20_000 },
    env: {
      PORT: String(E2E.port),
      EMBEDDED_PG_PORT: String(E2E.pgPort),
      LOCAL_CHAIN_PORT: String(E2E.chainPort),
      DATA_DIR: E2E.dataDir,
      ADMIN_TOKEN: E2E.adminToken,
      LOCAL_BLOCK_TIME: "1",
      WORKER_INTERVAL_MS: "1000",
      LOG_LEVEL: "warn",
      // Webhooks to a port that refuses connections: /dashboard/webhooks then shows real deliveries, waiting with an
      // error and a next retry (docs/webhooks.md), for axe and the screenshots.
      WEBHOOK_URLS: "http://127.0.0.1:9/e2e-webhooks",
      WEBHOOK_SECRET: "whsec_ZTJlLXdlYmhvb2stc2VjcmV0LW9mLTMyLWJ5dGVzISE=",
      // Every browser test comes from 127.0.0.1: with the default 10 sponsorship requests an hour per IP the
      // suite would lock itself out after ten submissions (and a rerun within the hour, at once). The per-wallet
      // limit keeps its default (5), so the rate-limit refusal is still shown, for one wallet.
      RATE_LIMIT_IP_PER_HOUR: "100000",
      REGISTER_LIMIT_IP_PER_HOUR: "100000",
      REPLAY_WINDOW_MS: String(E2E.replayWindowMs),
      // /request links transaction hashes to the explorer when one is configured.
      EXPLORER_URL: E2E.explorerUrl,
    },
  },
});
