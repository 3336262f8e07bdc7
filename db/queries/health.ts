import { sql } from "drizzle-orm";
import type { Executor } from "./executor";
import { queryPrepared } from "./prepared";

/**
 * One round trip: proves the database answers, reads the newest worker heartbeat (epoch ms, or null), and the
 * relayers that workers with a heartbeat newer than `freshSinceMs` report without gas money.
 */
export async function readHealthProbe(db: Executor, freshSinceMs: number): Promise<{ lastBeatMs: number | null; relayersWithoutGas: string[] }> {
  const rows = await queryPrepared<{ lastBeatMs: number | null; withoutGas: string[] | null }>(db,
    sql`SELECT (extract(epoch FROM max(last_beat_at)) * 1000)::float8 AS "lastBeatMs",
          (SELECT array_agg(DISTINCT r ORDER BY r) FROM worker_heartbeats f,
             jsonb_array_elements_text(coalesce(f.details->'relayers'->'withoutGas', '[]'::jsonb)) AS r
           WHERE f.last_beat_at >= to_timestamp(${freshSinceMs}::float8 / 1000)) AS "withoutGas"
        FROM worker_heartbeats`,
  );
  return { lastBeatMs: rows[0]?.lastBeatMs ?? null, relayersWithoutGas: rows[0]?.withoutGas ?? [] };
}
