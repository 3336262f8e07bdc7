import { sql } from "drizzle-orm";
import type { Executor } from "./executor";

/** One round trip: proves the database answers and reads the newest worker heartbeat (epoch ms, or null). */
export async function readHealthProbe(db: Executor): Promise<{ lastBeatMs: number | null }> {
  const rows = await db.execute<{ lastBeatMs: number | null }>(
    sql`SELECT (extract(epoch FROM max(last_beat_at)) * 1000)::float8 AS "lastBeatMs" FROM worker_heartbeats`,
  );
  return { lastBeatMs: rows[0]?.lastBeatMs ?? null };
}
