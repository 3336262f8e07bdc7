import path from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { alias: { "@": path.resolve(import.meta.dirname) } },
  test: {
    include: ["**/*.test.ts"],
    exclude: ["node_modules/**", ".next/**", ".data/**", "e2e/**"],
    globalSetup: ["./test/global-setup.ts"],
    pool: "forks",
    // Two cores: parallel, but bounded.
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    env: { LOG_LEVEL: "silent" },
    // CI also writes a JSON report, from which .ci/run prints one closing line for the whole run.
    reporters: process.env.CI ? ["default", "json"] : ["default"],
    outputFile: { json: "test-results/vitest.json" },
  },
});
