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

/**
 * Deletes every hit older than `before`, `batch` rows per statement (each its own short transaction, so no long lock
 * or huge WAL record), until one deletes fewer; returns how many went. A flood from many addresses adds hits faster
 * than one batch per pruning interval would remove them. Each batch walks the primary key on from the last one (no
 * index leads with `created_at`): starting from the table's beginning each time would pass every row the earlier
 * batches deleted and vacuum has not removed yet, work growing with the square of the backlog.
 */
export async function pruneRateLimitHits(db: Executor, before: Date, batch = 10_000): Promise<number> {
  let total = 0;
  let after = 0;
  for (;;) {
    const rows = await run<{ n: number; last: string | null }>(
      db,
      sql`
      WITH gone AS (
        DELETE FROM rate_limit_hits WHERE id IN (
          SELECT id FROM rate_limit_hits WHERE id > ${after} AND created_at < ${ts(before)} ORDER BY id LIMIT ${batch}
        ) RETURNING id
      )
      SELECT count(*)::int AS n, max(id)::text AS last FROM gone`,
    );
    const n = rows[0]?.n ?? 0;
    total += n;
    if (n < batch) return total;
    after = Number(rows[0]!.last);
  }
}
