import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { freePort } from "./ports";

/**
 * Once per `vitest run`: a real PostgreSQL (embedded, on a free port, in a temporary directory) with the
 * migrations applied to a template database. Each test file clones the template (test/db.ts), so files run in
 * parallel without seeing each other's rows. Tests that need a chain start their own anvil (test/chain.ts).
 */
export default async function setup(project: TestProject) {
  const dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-test-"));
  const port = await freePort();
  const pg = await startEmbeddedPostgres({ dataDir, port, database: "template_sponsorship" });
  await applyMigrations(pg.url);
  // A template must have no other connections when it is cloned; mark it as a template.
  const admin = postgres(pg.adminUrl, { max: 1, onnotice: () => {} });
  await admin`UPDATE pg_database SET datistemplate = true WHERE datname = 'template_sponsorship'`;
  await admin.end();

  // Tests connect as the superuser (some switch triggers off); the template's objects belong to the service role.
  project.provide("postgresAdminUrl", pg.adminUrl);
  project.provide("templateDatabase", "template_sponsorship");
  project.provide("testDataDir", dataDir);

  return async () => {
    await pg.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    postgresAdminUrl: string;
    templateDatabase: string;
    testDataDir: string;
  }
}
