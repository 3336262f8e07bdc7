import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { closeDatabase, createDatabase } from "./client";

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");
/**
 * SQL functions that hold rules run inside PostgreSQL (e.g. create_sponsorship_request): one current source file
 * each, applied after the migrations with CREATE OR REPLACE, so a reader finds a rule by its name and a change is
 * made in one place. A migration only drops a signature that changed.
 */
export const FUNCTIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "functions");
/**
 * The revision of db/functions/: raise it, and set FUNCTIONS_SHA256 to what db/migrate.test.ts prints, with every
 * change there. The database records the revision it holds (`installed_functions`), and an instance whose revision
 * is older installs nothing: during a rolling deploy an old worker that restarts must not put back its older bodies
 * under the new code. So a body must keep answering the calls of the release before it (add a field, keep the old
 * ones; a new signature beside the old one), as a migration keeps the columns the release before it reads.
 */
export const FUNCTIONS_REVISION = 1;
export const FUNCTIONS_SHA256 = "325625ea42efaacb4451634e0dbf933b006cd930f44f1a59d4cd585641c0c1f9";

export type FunctionSource = { name: string; source: string };

export function functionSources(folder = FUNCTIONS_FOLDER): FunctionSource[] {
  return readdirSync(folder)
    .filter((name) => name.endsWith(".sql"))
    .sort()
    .map((name) => ({ name, source: readFileSync(path.join(folder, name), "utf8") }));
}

/** sha256 over the sources' names and texts, in the order they are applied. */
export function functionsSha256(sources: FunctionSource[]): string {
  const hash = createHash("sha256");
  for (const { name, source } of sources) hash.update(`${name}\0${source}\0`);
  return hash.digest("hex");
}

export type MigrationResult = {
  /** "installed": this instance's db/functions/ are in place; "kept": the database holds a newer revision, left as it is. */
  functions: "installed" | "kept";
  /** The revision the database holds afterwards. */
  revision: number;
};

/**
 * Said at start-up when the database holds newer function bodies than this instance: expected while a rolling
 * deploy replaces it, a mistake if it lasts (an old release started against a newer database).
 */
export function keptFunctionsWarning(result: MigrationResult): string | undefined {
  if (result.functions === "installed") return undefined;
  return (
    `the database holds db/functions/ revision ${result.revision}, newer than this release's ${FUNCTIONS_REVISION}: left in place ` +
    "(to roll them back to this release's: npm run db:migrate -- --roll-back-functions)"
  );
}

/**
 * Applies the committed migrations and then db/functions/, once even when several processes start together (advisory
 * lock). `rollBackFunctions` installs this release's bodies over a newer revision's: an operator's rollback
 * (`npm run db:migrate -- --roll-back-functions`), never a start-up.
 */
export async function applyMigrations(url: string, options: { rollBackFunctions?: boolean } = {}): Promise<MigrationResult> {
  const db = createDatabase(url, { max: 1, applicationName: "sponsorship-migrate" });
  try {
    // One connection (max: 1), so the session lock covers the migrator's statements.
    await db.$client`SELECT pg_advisory_lock(hashtext('sponsorship-migrations'))`;
    try {
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
      const [held] = await db.$client<{ revision: number }[]>`SELECT revision FROM installed_functions WHERE id = 1`;
      if (held && held.revision > FUNCTIONS_REVISION && !options.rollBackFunctions) return { functions: "kept", revision: held.revision };
      const sources = functionSources();
      // One transaction: the bodies and the revision that names them land together, or not at all.
      await db.$client.begin(async (tx) => {
        for (const { source } of sources) await tx.unsafe(source).simple();
        await tx`
          INSERT INTO installed_functions (id, revision, sha256) VALUES (1, ${FUNCTIONS_REVISION}, ${functionsSha256(sources)})
          ON CONFLICT (id) DO UPDATE SET revision = EXCLUDED.revision, sha256 = EXCLUDED.sha256, installed_at = now()`;
      });
      return { functions: "installed", revision: FUNCTIONS_REVISION };
    } finally {
      await db.$client`SELECT pg_advisory_unlock(hashtext('sponsorship-migrations'))`;
    }
  } finally {
    await closeDatabase(db);
  }
}

// `npm run db:migrate [-- --roll-back-functions]` against DATABASE_URL.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const url = process.env.DATABASE_URL;
  const flags = process.argv.slice(2);
  const unknown = flags.find((flag) => flag !== "--roll-back-functions");
  if (!url || unknown) {
    console.error(unknown ? `db:migrate: unknown option ${unknown} (only --roll-back-functions)` : "db:migrate: DATABASE_URL is not set");
    process.exit(1);
  }
  applyMigrations(url, { rollBackFunctions: flags.includes("--roll-back-functions") }).then(
    (result) => console.log(keptFunctionsWarning(result) ?? `migrations applied; db/functions/ revision ${result.revision} installed`),
    (error: unknown) => {
      console.error(`db:migrate: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
