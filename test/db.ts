import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { inject } from "vitest";
import { closeDatabase, createDatabase, type Database } from "@/db/client";

export type TestDatabase = {
  url: string;
  db: Database;
  /** Drops the database (closes this pool first). */
  drop: () => Promise<void>;
};

/** A fresh database cloned from the migrated template: call in `beforeAll`, drop in `afterAll`. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = inject("postgresAdminUrl");
  const name = `test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${inject("templateDatabase")}`);
  } finally {
    await admin.end();
  }
  const url = adminUrl.replace(/\/postgres$/, `/${name}`);
  const db = createDatabase(url, { max: 10, applicationName: "sponsorship-test" });
  return {
    url,
    db,
    drop: async () => {
      await closeDatabase(db);
      const a = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await a.end();
      }
    },
  };
}
