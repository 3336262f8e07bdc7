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

function functionSources(): string[] {
  return readdirSync(FUNCTIONS_FOLDER)
    .filter((name) => name.endsWith(".sql"))
    .sort()
    .map((name) => readFileSync(path.join(FUNCTIONS_FOLDER, name), "utf8"));
}

/** Applies the committed migrations and then db/functions/, once even when several processes start together (advisory lock). */
export async function applyMigrations(url: string): Promise<void> {
  const db = createDatabase(url, { max: 1, applicationName: "sponsorship-migrate" });
  try {
    // One connection (max: 1), so the session lock covers the migrator's statements.
    await db.$client`SELECT pg_advisory_lock(hashtext('sponsorship-migrations'))`;
    try {
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
      for (const source of functionSources()) await db.$client.unsafe(source).simple();
    } finally {
      await db.$client`SELECT pg_advisory_unlock(hashtext('sponsorship-migrations'))`;
    }
  } finally {
    await closeDatabase(db);
  }
}

// `npm run db:migrate` against DATABASE_URL.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const url = process.env.DATABASE_URL;
  if (!url) {
    console.error("db:migrate: DATABASE_URL is not set");
    process.exit(1);
  }
  applyMigrations(url).then(
    () => console.log("migrations applied"),
    (error: unknown) => {
      console.error(`db:migrate: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
