import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openApiJson } from "@/lib/openapi";

/**
 * `npm run openapi:lint`: `redocly lint` (rules in redocly.yaml) over the document GET /openapi.json serves,
 * written to a temporary file first because the document is generated from the code, not kept in the tree.
 */

const dir = mkdtempSync(path.join(tmpdir(), "openapi-lint-"));
try {
  const file = path.join(dir, "openapi.json");
  writeFileSync(file, openApiJson());
  const root = path.resolve(import.meta.dirname, "..");
  const result = spawnSync(path.join(root, "node_modules", ".bin", "redocly"), ["lint", "--config", path.join(root, "redocly.yaml"), file], {
    stdio: "inherit",
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
  });
  process.exitCode = result.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
