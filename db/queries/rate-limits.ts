import { sql } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";
import { ts } from "@/db/sql/fragments";

/**
 * Rolling-window counters: one row per counted hit in `rate_limit_hits`. A key is over its limit when its
 * `limit`-th newest hit is inside the window; the window has room again when that hit leaves it. Reading that one
 * row (an index scan from the newest end) answers both "over the limit?" and "until when?". The reads run inside
 * PostgreSQL, in db/functions/create_sponsorship_request.sql and db/functions/register_wallet.sql; this file holds
 * the pruning.
 */

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
