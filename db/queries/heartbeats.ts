import { sql } from "drizzle-orm";
import type { RequestStatus } from "@/db/schema";
import { run, type Executor } from "@/db/sql/run";

/**
 * Worker liveness (worker_heartbeats). Each worker upserts its row every few seconds with `details` (see
 * docs/worker.md for the shape); /health and the dashboard read it. A worker is alive while its last beat is
 * recent; a graceful stop deletes the row.
 */

/**
 * A heartbeat row silent for longer than this belongs to a worker that is gone (a crash, SIGKILL, OOM or the
 * stuck-stage exit can leave its row behind until it is pruned): it is left out of
 * `sponsorship_worker_heartbeat_age_seconds` (db/queries/metrics.ts), and the relayers only it held keys for are
 * retired (db/queries/relayers.ts relayerInService). deploy/prometheus/alerts.yml bounds its per-worker warning by the
 * same 300 s.
 */
export const GONE_WORKER_AFTER_SECONDS = 300;

export type HeartbeatInput = {
  workerId: string;
  hostname: string;
  pid: number;
  startedAt: Date;
  details: Record<string, unknown>;
};

export async function upsertHeartbeat(db: Executor, beat: HeartbeatInput): Promise<void> {
  await run(
    db,
    sql`
    INSERT INTO worker_heartbeats (worker_id, hostname, pid, started_at, last_beat_at, details)
    VALUES (${beat.workerId}, ${beat.hostname}, ${beat.pid}, ${beat.startedAt.toISOString()}::timestamptz, now(), ${JSON.stringify(beat.details)}::jsonb)
    ON CONFLICT (worker_id) DO UPDATE SET last_beat_at = now(), details = EXCLUDED.details`,
  );
}

export async function deleteHeartbeat(db: Executor, workerId: string): Promise<void> {
  await run(db, sql`DELETE FROM worker_heartbeats WHERE worker_id = ${workerId}`);
}

export type WorkerPresence = {
  workerId: string;
  hostname: string;
  pid: number;
  lastBeatAgeMs: number;
  /** The relayer addresses the worker holds keys for (from its heartbeat); null when it has not said. */
  configuredRelayers: string[] | null;
  /** The PID namespace its pid belongs to (from its heartbeat); null when it has not said. */
  pidNamespace: string | null;
};

/** Every heartbeat row with its age (database clock). */
export async function listWorkerPresence(db: Executor): Promise<WorkerPresence[]> {
  const rows = await run<{ worker_id: string; hostname: string; pid: number; age_ms: string; configured: unknown; pid_namespace: string | null }>(
    db,
    sql`
    SELECT worker_id, hostname, pid, floor(extract(epoch FROM now() - last_beat_at) * 1000)::bigint AS age_ms,
           details -> 'relayers' -> 'configured' AS configured, details ->> 'pidNamespace' AS pid_namespace
    FROM worker_heartbeats ORDER BY worker_id`,
  );
  return rows.map((r) => ({
    workerId: r.worker_id,
    hostname: r.hostname,
    pid: r.pid,
    lastBeatAgeMs: Number(r.age_ms),
    configuredRelayers: Array.isArray(r.configured) ? r.configured.filter((a): a is string => typeof a === "string") : null,
    pidNamespace: r.pid_namespace,
  }));
}

/** Removes rows of workers silent for longer than `olderThanMs` (crashed processes leave theirs behind). */
export async function pruneHeartbeats(db: Executor, olderThanMs: number): Promise<number> {
  const rows = await run(
    db,
    sql`
    DELETE FROM worker_heartbeats WHERE last_beat_at < now() - ${olderThanMs} * interval '1 millisecond' RETURNING worker_id`,
  );
  return rows.length;
}

export type QueueDepths = { pending: number; approved: number; relayed: number };

/** The open requests by status (the heartbeat's queue depths). */
export async function countOpenRequests(db: Executor): Promise<QueueDepths> {
  const rows = await run<{ status: RequestStatus; n: number }>(
    db,
    sql`
    SELECT status, count(*)::int AS n FROM sponsorship_requests WHERE status IN ('pending', 'approved', 'relayed') GROUP BY status`,
  );
  const depths: QueueDepths = { pending: 0, approved: 0, relayed: 0 };
  for (const r of rows) if (r.status in depths) depths[r.status as keyof QueueDepths] = r.n;
  return depths;
}
