import path from "node:path";
import { fileURLToPath } from "node:url";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { closeDatabase, createDatabase } from "./client";

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");

/** Applies the committed migrations, once even when several processes start together (advisory lock). */
export async function applyMigrations(url: string): Promise<void> {
  const db = createDatabase(url, { max: 1, applicationName: "sponsorship-migrate" });
  try {
    // One connection (max: 1), so the session lock covers the migrator's statements.
    await db.$client`SELECT pg_advisory_lock(hashtext('sponsorship-migrations'))`;
    try {
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
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
