import { defineConfig, globalIgnores } from "eslint/config";
import nextVitals from "eslint-config-next/core-web-vitals";
import nextTs from "eslint-config-next/typescript";

export default defineConfig([
  ...nextVitals,
  ...nextTs,
  globalIgnores([
    ".next/**",
    ".data/**",
    "node_modules/**",
    "next-env.d.ts",
    "contracts/generated/**",
    "lib/api/types.ts",
    "db/migrations/**",
    "test-results/**",
    "playwright-report/**",
    "bench/results/**",
    "e2e/artifacts/**",
  ]),
  {
    rules: {
      "no-console": ["error", { allow: ["error"] }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  {
    // Command-line entry points talk to a terminal on purpose.
    files: ["scripts/**", "test/write-route-table.ts", "contracts/build.ts", "contracts/deploy.ts", "bench/**", "db/migrate.ts"],
    rules: { "no-console": "off" },
  },
]);
