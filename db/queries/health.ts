import { sql } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";

/** The relayers that live workers (a heartbeat at most `staleAfterMs` old) list under `details.relayers.<list>`. */
const reportedRelayers = (list: "withoutGas" | "notAuthorised", staleAfterMs: number) =>
  sql`(SELECT array_agg(DISTINCT r ORDER BY r) FROM worker_heartbeats f,
         jsonb_array_elements_text(coalesce(f.details->'relayers'->${sql.raw(`'${list}'`)}, '[]'::jsonb)) AS r
       WHERE f.last_beat_at >= now() - make_interval(secs => ${staleAfterMs}::float8 / 1000))`;

/**
 * One round trip: proves the database answers, reads the newest worker heartbeat (epoch ms, or null) and its age,
 * the relayers that workers with a heartbeat at most `staleAfterMs` old report without gas money or not authorised
 * by the treasury, and the administrator's pause. Ages are the database's (`now()` against the `last_beat_at` it
 * wrote): the web server's wall clock, which may step or differ, is not compared with them.
 */
export async function readHealthProbe(
  db: Executor,
  staleAfterMs: number,
): Promise<{
  lastBeatMs: number | null;
  ageMs: number | null;
  relayersWithoutGas: string[];
  relayersNotAuthorised: string[];
  pause: { reason: string | null } | null;
}> {
  const rows = await run<{
    lastBeatMs: number | null;
    ageMs: number | null;
    withoutGas: string[] | null;
    notAuthorised: string[] | null;
    paused: boolean | null;
    pauseReason: string | null;
  }>(
    db,
    sql`SELECT (extract(epoch FROM max(last_beat_at)) * 1000)::float8 AS "lastBeatMs",
          (extract(epoch FROM now() - max(last_beat_at)) * 1000)::float8 AS "ageMs",
          ${reportedRelayers("withoutGas", staleAfterMs)} AS "withoutGas",
          ${reportedRelayers("notAuthorised", staleAfterMs)} AS "notAuthorised",
          (SELECT s.paused FROM service_state s WHERE s.id = 1) AS paused,
          (SELECT s.pause_reason FROM service_state s WHERE s.id = 1) AS "pauseReason"
        FROM worker_heartbeats`,
  );
  const row = rows[0];
  return {
    lastBeatMs: row?.lastBeatMs ?? null,
    ageMs: row?.ageMs ?? null,
    relayersWithoutGas: row?.withoutGas ?? [],
    relayersNotAuthorised: row?.notAuthorised ?? [],
    pause: row?.paused ? { reason: row.pauseReason } : null,
  };
}
