import { defineConfig, globalIgnores } from "eslint/config";
import nextVitals from "eslint-config-next/core-web-vitals";
import nextTs from "eslint-config-next/typescript";
import drizzle from "eslint-plugin-drizzle";
import localRules from "./eslint-rules/client-imports.mjs";

/**
 * Guard rails that keep the layout (README "Architecture", docs/architecture.md); test/lint-rules.test.ts lints
 * deliberate violations through ESLint's Node API and fails if any of these stops catching them.
 */
const LAYER_IMPORTS = {
  patterns: [
    { regex: "^(@/|(\\.\\./)+)app/", message: "lib/ and db/ never import app/: the app calls the layers below it, not the reverse." },
    { regex: "^(@/|(\\.\\./)+)test/", message: "lib/ and db/ never import test/: test helpers live with the tests." },
    { regex: "^vitest(/|$)", message: "Only tests import vitest; test helpers live in test/." },
  ],
};
/** Objects that are Drizzle databases or transactions here: `.delete(...)` on a Map or a Set is not a DELETE. */
const DRIZZLE_OBJECTS = { drizzleObjectName: ["db", "tx", "database", "appDb"] };

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
    files: ["lib/**/*.{ts,tsx}", "db/**/*.{ts,tsx}"],
    ignores: ["**/*.test.ts"],
    rules: { "no-restricted-imports": ["error", LAYER_IMPORTS] },
  },
  {
    plugins: { drizzle, "boundaries-local": localRules },
    rules: { "boundaries-local/no-server-imports-in-client-components": "error" },
  },
  {
    // Shipped code only: a test may empty a table on purpose.
    files: ["**/*.{ts,tsx}"],
    ignores: ["**/*.test.ts"],
    rules: {
      "drizzle/enforce-delete-with-where": ["error", DRIZZLE_OBJECTS],
      "drizzle/enforce-update-with-where": ["error", DRIZZLE_OBJECTS],
    },
  },
  {
    // Command-line entry points talk to a terminal on purpose.
    files: ["scripts/**", "test/write-route-table.ts", "contracts/build.ts", "contracts/deploy.ts", "bench/**", "db/migrate.ts"],
    rules: { "no-console": "off" },
  },
]);
