import { sql } from "drizzle-orm";
import type { RateLimitScope } from "@/db/schema";
import { run, type Executor } from "@/db/sql/run";
import { ts } from "@/db/sql/fragments";

/**
 * Rolling-window counters: one row per counted hit in `rate_limit_hits`. A key is over its limit when its
 * `limit`-th newest hit is inside the window; the window has room again when that hit leaves it. Reading that one
 * row (an index scan from the newest end) answers both "over the limit?" and "until when?".
 */

/** SQL for "created_at of the limit-th newest hit inside the window, as epoch milliseconds, or NULL". */
export const limitReachedAtMs = (scope: RateLimitScope, key: string, limit: number, windowStart: Date) => sql`(
  SELECT (extract(epoch FROM h.created_at) * 1000)::float8 FROM rate_limit_hits h
  WHERE h.scope = ${scope} AND h.key = ${key} AND h.created_at > ${ts(windowStart)}
  ORDER BY h.created_at DESC OFFSET ${Math.max(0, limit - 1)} LIMIT 1
)`;

/** SQL that records hits (to be used in a CTE or alone). */
export const insertHitsSql = (hits: readonly { scope: RateLimitScope; key: string }[], now: Date) =>
  sql`INSERT INTO rate_limit_hits (scope, key, created_at) VALUES ${sql.join(
    hits.map((h) => sql`(${h.scope}, ${h.key}, ${ts(now)})`),
    sql`, `,
  )}`;

/** Deletes hits older than `before` (at most `batch` rows a call); returns how many went. */
export async function pruneRateLimitHits(db: Executor, before: Date, batch = 10_000): Promise<number> {
  const rows = await run<{ n: number }>(
    db,
    sql`
    WITH gone AS (
      DELETE FROM rate_limit_hits WHERE id IN (
        SELECT id FROM rate_limit_hits WHERE created_at < ${ts(before)} LIMIT ${batch}
      ) RETURNING 1
    )
    SELECT count(*)::int AS n FROM gone`,
  );
  return rows[0]?.n ?? 0;
}
