import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rateLimitHits, wallets } from "@/db/schema";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { lockKeysSql } from "./advisory-locks";
import { twoStepTransaction } from "./transaction";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const countHits = (key: string) => sql`SELECT count(*)::int AS n FROM rate_limit_hits WHERE scope = 'admin_sign_in' AND key = ${key}`;
const insertHit = (key: string) => sql`INSERT INTO rate_limit_hits (scope, key) VALUES ('admin_sign_in', ${key})`;

describe("twoStepTransaction", () => {
  it("holds the first step's lock until COMMIT: concurrent check-then-insert under one key never overshoots", async () => {
    const key = `k-${crypto.randomUUID()}`;
    // Each transaction inserts only while fewer than 5 rows exist: without the lock held across the two steps,
    // 40 concurrent ones would all see 0 and insert.
    const attempts = await Promise.all(
      Array.from({ length: 40 }, () =>
        twoStepTransaction(t.db, [lockKeysSql([key]), countHits(key)], ([, rows]) => {
          const n = (rows![0] as { n: number }).n;
          return { statements: n < 5 ? [insertHit(key)] : [], finish: () => n < 5 };
        }),
      ),
    );
    expect(attempts.filter(Boolean)).toHaveLength(5);
    const rows = await t.db
      .select()
      .from(rateLimitHits)
      .where(and(eq(rateLimitHits.scope, "admin_sign_in"), eq(rateLimitHits.key, key)));
    expect(rows).toHaveLength(5);
  });

  it("rolls back when the decision throws, and when a second-step statement fails; the connection stays usable", async () => {
    const key = `k-${crypto.randomUUID()}`;
    await expect(
      twoStepTransaction(t.db, [insertHit(key)], () => {
        throw new Error("decided to give up");
      }),
    ).rejects.toThrow("decided to give up");
    const address = `0x${"ab".repeat(20)}`;
    await t.db.insert(wallets).values({ walletAddress: address }).onConflictDoNothing();
    await expect(
      twoStepTransaction(t.db, [insertHit(key)], () => ({
        statements: [insertHit(key), sql`INSERT INTO wallets (wallet_address) VALUES (${address})`],
        finish: () => "never",
      })),
    ).rejects.toMatchObject({ code: "23505" });
    const after = await twoStepTransaction(t.db, [countHits(key)], ([rows]) => ({ statements: [], finish: () => (rows![0] as { n: number }).n }));
    expect(after).toBe(0);
    // Every pooled connection still works (none was left inside an aborted transaction).
    await Promise.all(Array.from({ length: 20 }, () => t.db.execute(sql`SELECT 1`)));
  });

  it("returns the second step's rows to finish", async () => {
    const key = `k-${crypto.randomUUID()}`;
    const n = await twoStepTransaction(t.db, [], () => ({
      statements: [insertHit(key), countHits(key)],
      finish: ([, counted]) => (counted![0] as { n: number }).n,
    }));
    expect(n).toBe(1);
  });
});
