import { sql } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";

/**
 * GET /faucet's `medianSecondsToComplete`: the median of completedAt - requestedAt over the requests completed in
 * the last hour (the database's clock), or null when none was. Requests asked for over a day before are left out, so the scan
 * stays on the requested_at index (a request that took a day to complete is not "usual" anyway).
 */
export async function readMedianSecondsToComplete(db: Executor): Promise<number | null> {
  const rows = await run<{ median: number | null }>(
    db,
    sql`SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM completed_at - requested_at))::float8 AS median
        FROM sponsorship_requests
        WHERE status = 'completed'
          AND requested_at > now() - interval '1 day'
          AND completed_at > now() - interval '1 hour'`,
  );
  const median = rows[0]?.median;
  return median === null || median === undefined ? null : Math.round(median * 10) / 10;
}
