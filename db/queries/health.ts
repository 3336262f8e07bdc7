import { sql } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";

/** The relayers that live workers (a heartbeat newer than `freshSinceMs`) list under `details.relayers.<list>`. */
const reportedRelayers = (list: "withoutGas" | "notAuthorised", freshSinceMs: number) =>
  sql`(SELECT array_agg(DISTINCT r ORDER BY r) FROM worker_heartbeats f,
         jsonb_array_elements_text(coalesce(f.details->'relayers'->${sql.raw(`'${list}'`)}, '[]'::jsonb)) AS r
       WHERE f.last_beat_at >= to_timestamp(${freshSinceMs}::float8 / 1000))`;

/**
 * One round trip: proves the database answers, reads the newest worker heartbeat (epoch ms, or null), the relayers
 * that workers with a heartbeat newer than `freshSinceMs` report without gas money or not authorised by the
 * treasury, and the administrator's pause.
 */
export async function readHealthProbe(
  db: Executor,
  freshSinceMs: number,
): Promise<{ lastBeatMs: number | null; relayersWithoutGas: string[]; relayersNotAuthorised: string[]; pause: { reason: string | null } | null }> {
  const rows = await run<{
    lastBeatMs: number | null;
    withoutGas: string[] | null;
    notAuthorised: string[] | null;
    paused: boolean | null;
    pauseReason: string | null;
  }>(
    db,
    sql`SELECT (extract(epoch FROM max(last_beat_at)) * 1000)::float8 AS "lastBeatMs",
          ${reportedRelayers("withoutGas", freshSinceMs)} AS "withoutGas",
          ${reportedRelayers("notAuthorised", freshSinceMs)} AS "notAuthorised",
          (SELECT s.paused FROM service_state s WHERE s.id = 1) AS paused,
          (SELECT s.pause_reason FROM service_state s WHERE s.id = 1) AS "pauseReason"
        FROM worker_heartbeats`,
  );
  const row = rows[0];
  return {
    lastBeatMs: row?.lastBeatMs ?? null,
    relayersWithoutGas: row?.withoutGas ?? [],
    relayersNotAuthorised: row?.notAuthorised ?? [],
    pause: row?.paused ? { reason: row.pauseReason } : null,
  };
}
