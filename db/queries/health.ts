import { sql } from "drizzle-orm";
import type { Executor } from "./executor";
import { queryPrepared } from "./prepared";

/** One round trip: proves the database answers and reads the newest worker heartbeat (epoch ms, or null). */
export async function readHealthProbe(db: Executor): Promise<{ lastBeatMs: number | null }> {
  const rows = await queryPrepared<{ lastBeatMs: number | null }>(db, 
    sql`SELECT (extract(epoch FROM max(last_beat_at)) * 1000)::float8 AS "lastBeatMs" FROM worker_heartbeats`,
  );
  return { lastBeatMs: rows[0]?.lastBeatMs ?? null };
}
