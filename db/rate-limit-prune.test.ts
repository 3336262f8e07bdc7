import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pruneRateLimitHits } from "@/db/queries/rate-limits";
import { createTestDatabase, type TestDatabase } from "@/test/db";

/** The web server prunes rate-limit hits every 10 minutes (server.ts); one call must remove every expired hit. */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe("pruneRateLimitHits", () => {
  it("removes every hit older than the cut in batches, however many, and keeps the newer ones", async () => {
    const cut = new Date("2026-11-20T12:00:00.000Z");
    // 2,500 expired hits (two and a half batches of 1,000) between 30 inside the window (ids on both sides), from
    // many addresses.
    const young = sql`
      INSERT INTO rate_limit_hits (scope, key, created_at)
      SELECT 'sponsorship_ip', '203.0.113.' || i, ${cut.toISOString()}::timestamptz + (i || ' seconds')::interval
      FROM generate_series(0, 14) AS i`;
    await t.db.execute(young);
    await t.db.execute(sql`
      INSERT INTO rate_limit_hits (scope, key, created_at)
      SELECT 'register_ip', '198.51.100.' || (i % 250), ${cut.toISOString()}::timestamptz - (i || ' seconds')::interval
      FROM generate_series(1, 2500) AS i`);
    await t.db.execute(young);

    expect(await pruneRateLimitHits(t.db, cut, 1_000)).toBe(2_500);
    const left = await t.db.execute<{ n: number; oldest: string }>(sql`SELECT count(*)::int AS n, min(created_at)::text AS oldest FROM rate_limit_hits`);
    expect(left[0]!.n).toBe(30);
    expect(new Date(left[0]!.oldest).getTime()).toBe(cut.getTime());
    expect(await pruneRateLimitHits(t.db, cut, 1_000)).toBe(0);
  });
});
