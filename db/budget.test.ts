import { readFileSync } from "node:fs";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { pruneBudgetCounts, readBudgetExhaustion } from "@/db/queries/controls";
import { createTestDatabase, type TestDatabase } from "@/test/db";

/**
 * The global budget's count (db/functions/sponsorship_budget.sql): the settled part kept once per minute plus the
 * live rows of the last two minutes must equal a plain sum over the window's minutes, whatever the rows and whenever
 * it is read; the settled part is computed once per minute and reused.
 */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());
beforeEach(async () => {
  await t.db.execute(sql`TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows`);
});

const MINUTE = 60_000;
const base = Date.parse("2026-11-20T12:00:00.000Z");

async function used(now: number): Promise<{ hour: number; day: number }> {
  const rows = await t.db.execute<{ h: string; d: string }>(
    sql`SELECT used_hour::text AS h, used_day::text AS d FROM sponsorship_budget_used(${new Date(now).toISOString()}::timestamptz)`,
  );
  return { hour: Number(rows[0]!.h), day: Number(rows[0]!.d) };
}

function bruteForce(rows: { minute: number; created: number }[], now: number) {
  const current = Math.floor(now / MINUTE) * MINUTE;
  // Up to the minute after the current one (a creation that started after the read may have committed into it);
  // none can be later on the database's one clock.
  const sum = (from: number) => rows.filter((r) => r.minute >= from && r.minute <= current + MINUTE).reduce((n, r) => n + r.created, 0);
  return { hour: sum(current - 60 * MINUTE), day: sum(current - 1440 * MINUTE) };
}

async function insertCounts(rows: { shard: number; minute: number; created: number }[]) {
  for (const r of rows) {
    await t.db.execute(sql`INSERT INTO sponsorship_budget_counts (shard, minute, created)
      VALUES (${r.shard}, ${new Date(r.minute).toISOString()}::timestamptz, ${r.created})`);
  }
}

describe("the global budget's count", () => {
  it("equals the sum over the rolling hour and day, read at any moment, with the settled part reused within a minute", async () => {
    // Deterministic pseudo-random rows over 26 hours of minutes and 16 shards.
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const rows: { shard: number; minute: number; created: number }[] = [];
    const seen = new Set<string>();
    for (let i = 0; i < 600; i++) {
      const minute = base - Math.floor(random() * 26 * 60) * MINUTE;
      const shard = Math.floor(random() * 16);
      if (seen.has(`${shard}:${minute}`)) continue;
      seen.add(`${shard}:${minute}`);
      rows.push({ shard, minute, created: 1 + Math.floor(random() * 9) });
    }
    // The edges of both windows and the live minutes, exactly.
    for (const [shard, offset] of [
      [1, 0],
      [2, -1],
      [3, -2],
      [4, -60],
      [5, -61],
      [6, -1440],
      [7, -1441],
    ] as const) {
      const minute = base + offset * MINUTE;
      if (!seen.has(`${shard}:${minute}`)) rows.push({ shard, minute, created: 100 });
    }
    await insertCounts(rows);

    for (const now of [base + 30_000, base + 59_999, base - 17 * MINUTE + 1, base - 60 * MINUTE, base - 1441 * MINUTE + 5]) {
      expect(await used(now), new Date(now).toISOString()).toEqual(bruteForce(rows, now));
    }
    const kept = await t.db.execute<{ n: string }>(sql`SELECT count(*)::text AS n FROM sponsorship_budget_windows`);
    expect(Number(kept[0]!.n)).toBe(4); // base + 30 s and base + 59.999 s share one minute

    // Creations in the current and the previous minute are live: counted at once, the settled part unchanged.
    await insertCounts([{ shard: 9, minute: base - MINUTE, created: 5 }]);
    await t.db.execute(
      sql`UPDATE sponsorship_budget_counts SET created = created + 3 WHERE shard = 1 AND minute = ${new Date(base).toISOString()}::timestamptz`,
    );
    const before = bruteForce(rows, base);
    expect(await used(base + 45_000)).toEqual({ hour: before.hour + 8, day: before.day + 8 });
  });

  it("prunes what no window needs and counts the same afterwards", async () => {
    const rows = [
      { shard: 0, minute: base - 26 * 60 * MINUTE, created: 4 },
      { shard: 0, minute: base - 23 * 60 * MINUTE, created: 2 },
      { shard: 3, minute: base - 30 * MINUTE, created: 1 },
      { shard: 3, minute: base, created: 6 },
    ];
    await insertCounts(rows);
    const before = await used(base + 1_000);
    expect(before).toEqual(bruteForce(rows, base + 1_000));
    await used(base - 2 * 60 * MINUTE); // a settled window older than an hour
    expect(await pruneBudgetCounts(t.db, new Date(base + 1_000))).toBe(2);
    expect(await used(base + 1_000)).toEqual(before);
  });

  it("prunes on the database's clock, which wrote the counts: a web server whose clock is ahead deletes nothing the day needs", async () => {
    await t.db.execute(sql`INSERT INTO sponsorship_budget_counts (shard, minute, created)
      VALUES (0, date_trunc('minute', statement_timestamp() - interval '26 hours'), 5),
        (0, date_trunc('minute', statement_timestamp() - interval '23 hours'), 7), (0, date_trunc('minute', statement_timestamp()), 1)`);
    const day = async () => (await t.db.execute<{ d: string }>(sql`SELECT used_day::text AS d FROM sponsorship_budget_used(statement_timestamp())`))[0]!.d;
    expect(await day()).toBe("8");
    // server.ts prunes every few minutes; its clock three hours ahead (a step, or a skew). Before, the cutoff was
    // that clock minus 25 hours: the count 23 hours old went, and the day's budget had 7 places more to give.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() + 3 * 3_600_000 });
    try {
      // Only the count older than a day and an hour goes.
      expect(await pruneBudgetCounts(t.db)).toBe(1);
    } finally {
      vi.useRealTimers();
    }
    expect(await day()).toBe("8");
  });
});

describe("the global budget's refusal (429 budget_exhausted and its Retry-After)", () => {
  const HOUR = 60 * MINUTE;
  async function refusal(now: number, perHour: number, perDay: number, hint?: number) {
    const rows = await t.db.execute<{ r: { refusal: string; window: string; retryAtMs: number; retryInMs: number } | null }>(
      sql`SELECT sponsorship_budget_refusal(${new Date(now).toISOString()}::timestamptz, ${perHour}::int, ${perDay}::int,
        ${hint === undefined ? null : new Date(hint).toISOString()}::timestamptz) AS r`,
    );
    return rows[0]!.r;
  }

  it("refuses once a window is full, with the moment its oldest creations have left it, the day's like the hour's", async () => {
    await insertCounts([
      { shard: 0, minute: base - 20 * HOUR, created: 2 },
      { shard: 1, minute: base - 10 * HOUR, created: 2 },
      { shard: 0, minute: base - 50 * MINUTE, created: 2 },
      { shard: 2, minute: base - 10 * MINUTE, created: 1 },
    ]);
    // The day holds 7, the hour 3.
    expect(await refusal(base, 0, 8)).toBeNull();
    expect(await refusal(base, 4, 0)).toBeNull();
    // SPONSOR_BUDGET_PER_DAY=7 alone: full. One creation must leave: the oldest minute's, a day and a minute after it.
    expect(await refusal(base, 0, 7)).toEqual({
      refusal: "budget_exhausted",
      window: "day",
      retryAtMs: base - 20 * HOUR + 24 * HOUR + MINUTE,
      retryInMs: 4 * HOUR + MINUTE, // the wait from the time it was asked at: callers subtract no clock of theirs
    });
    // A budget lowered below the count: as many must leave as it is over, plus one (7 against a budget of 4: 4 leave,
    // the oldest minute's 2, then the next one's 2).
    expect(await refusal(base, 0, 4)).toMatchObject({ window: "day", retryAtMs: base - 10 * HOUR + 24 * HOUR + MINUTE });
    // SPONSOR_BUDGET_PER_HOUR=3 alone: the hour's oldest minute leaves an hour and a minute after it.
    expect(await refusal(base, 3, 0)).toEqual({
      refusal: "budget_exhausted",
      window: "hour",
      retryAtMs: base - 50 * MINUTE + HOUR + MINUTE,
      retryInMs: 11 * MINUTE,
    });
    // Both full: the later of the two, named by the day.
    expect(await refusal(base, 3, 7)).toMatchObject({ refusal: "budget_exhausted", window: "day", retryAtMs: base - 20 * HOUR + 24 * HOUR + MINUTE });
    // A hint still ahead is the answer without the walk; one in the past is not.
    expect(await refusal(base, 3, 0, base + 5 * MINUTE)).toMatchObject({ retryAtMs: base + 5 * MINUTE, retryInMs: 5 * MINUTE });
    expect(await refusal(base, 3, 0, base - MINUTE)).toMatchObject({ retryAtMs: base - 50 * MINUTE + HOUR + MINUTE });
  });

  it("gives the day's Retry-After 1,440 minutes on, whatever the session's TimeZone, across a change of daylight saving time", async () => {
    // Counted at 09:30 UTC on 28 March 2026, read 22.5 hours later: Berlin moved its clocks forward at 01:00 UTC on
    // the 29th. Before: a calendar day in the session's zone (Berlin), so the answer came an hour early.
    const counted = Date.parse("2026-03-28T09:30:00Z");
    const now = Date.parse("2026-03-29T08:00:00Z");
    await insertCounts([{ shard: 0, minute: counted, created: 1 }]);
    const rows = await t.db.$client.begin(async (tx) => {
      await tx.unsafe("SET LOCAL TimeZone = 'Europe/Berlin'");
      return tx.unsafe<{ r: { window: string; retryAtMs: number } }[]>("SELECT sponsorship_budget_refusal($1::timestamptz, 0, 1, NULL) AS r", [
        new Date(now).toISOString(),
      ]);
    });
    expect(rows[0]!.r).toMatchObject({ window: "day", retryAtMs: counted + 1440 * MINUTE + MINUTE });
  });

  it("still gives a wait while an instance of the earlier version has reinstalled its function, without retryInMs", async () => {
    // A release from before db/functions/ revisions (db/migrate.ts) reinstalls its bodies on every start: during a
    // rolling deploy or a rollback to it, such an instance puts back the body that returned retryAtMs alone. Before
    // the fallback the wait came out NaN.
    const file = readFileSync(path.join(import.meta.dirname, "functions", "sponsorship_budget.sql"), "utf8");
    const earlier = file.replace(", 'retryInMs', extract(epoch FROM v_retry - p_now) * 1000", "");
    expect(earlier).not.toBe(file);
    await t.db.execute(sql`INSERT INTO sponsorship_budget_counts (shard, minute, created) VALUES (0, date_trunc('minute', statement_timestamp()), 3)`);
    try {
      await t.db.execute(sql.raw(earlier));
      const refusal = await readBudgetExhaustion(t.db, { perHour: 3, perDay: 0 });
      expect(refusal!.retryInMs).toBeGreaterThan(0);
      expect(refusal!.retryInMs).toBeLessThanOrEqual(HOUR + MINUTE);
    } finally {
      await t.db.execute(sql.raw(file));
    }
  });
});
