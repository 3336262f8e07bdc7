import { sql } from "drizzle-orm";
import type { Address } from "viem";
import type { Database } from "@/db/client";
import { run } from "@/db/sql/run";
import { GONE_WORKER_AFTER_SECONDS } from "./heartbeats";
import { relayerInService } from "./relayers";
import { relayStatus, requestStatus, type RelayStatus, type RequestStatus } from "@/db/schema";

/**
 * Read-only queries behind the Prometheus metrics that describe the whole service (lib/metrics/service.ts).
 * They run on each scrape, so each one is a single statement; the one that scans the requests table
 * (`countRequestsByStatus`) is cached by its caller.
 */

export type ServiceSnapshot = {
  requestsByStatus: Record<RequestStatus, number>;
  /** Seconds since the oldest request still in each open status was created; absent when none is open. */
  oldestOpenSeconds: Partial<Record<"pending" | "approved" | "relayed", number>>;
  relaysByStatus: Record<RelayStatus, number>;
  heartbeats: { workerId: string; ageSeconds: number }[];
  relayers: { address: Address; nextNonce: number }[];
};

const zeroes = <K extends string>(keys: readonly K[]) => Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;

/** Requests per status (a scan of the table: the caller caches it). */
export async function countRequestsByStatus(db: Database): Promise<Record<RequestStatus, number>> {
  const rows = await run<{ status: RequestStatus; n: number }>(db, sql`SELECT status, count(*)::int AS n FROM sponsorship_requests GROUP BY status`);
  const out = zeroes(requestStatus.enumValues);
  for (const r of rows) out[r.status] = Number(r.n);
  return out;
}

/** Age of the oldest open request per open status (uses the partial queue index: open rows only). */
export async function measureOldestOpenRequests(db: Database): Promise<ServiceSnapshot["oldestOpenSeconds"]> {
  const rows = await run<{ status: "pending" | "approved" | "relayed"; age: number }>(
    db,
    sql`
    SELECT status, extract(epoch FROM now() - min(requested_at))::float8 AS age
    FROM sponsorship_requests
    WHERE status IN ('pending', 'approved', 'relayed')
    GROUP BY status`,
  );
  const out: ServiceSnapshot["oldestOpenSeconds"] = {};
  for (const r of rows) out[r.status] = Math.max(0, Number(r.age));
  return out;
}

export async function countRelayTransactionsByStatus(db: Database): Promise<Record<RelayStatus, number>> {
  const rows = await run<{ status: RelayStatus; n: number }>(db, sql`SELECT status, count(*)::int AS n FROM relay_transactions GROUP BY status`);
  const out = zeroes(relayStatus.enumValues);
  for (const r of rows) out[r.status] = Number(r.n);
  return out;
}

/**
 * Each worker's heartbeat age: the workers that beat within GONE_WORKER_AFTER_SECONDS (a row silent for longer is a
 * dead worker's, and every start has a new worker id: a restarted worker's dead predecessor neither keeps an alert
 * firing nor adds a series per restart), and always the newest row
 * whatever its age, so that while no worker lives the freshest age keeps growing (SponsorshipWorkerStale) instead of
 * vanishing. Rows are only read here: the worker prunes old ones (worker/heartbeat.ts).
 */
export async function listWorkerHeartbeatAges(db: Database): Promise<ServiceSnapshot["heartbeats"]> {
  const rows = await run<{ worker_id: string; age: number }>(
    db,
    sql`
    SELECT worker_id, extract(epoch FROM now() - last_beat_at)::float8 AS age
    FROM worker_heartbeats
    WHERE last_beat_at > now() - ${GONE_WORKER_AFTER_SECONDS} * interval '1 second'
       OR last_beat_at = (SELECT max(last_beat_at) FROM worker_heartbeats)
    ORDER BY worker_id`,
  );
  return rows.map((r) => ({ workerId: r.worker_id, ageSeconds: Math.max(0, Number(r.age)) }));
}

/** The relayers in service (relayerInService: a retired one leaves the relayer series) and their next nonces. */
export async function listRelayerNextNonces(db: Database): Promise<ServiceSnapshot["relayers"]> {
  const rows = await run<{ address: Address; next_nonce: number | string }>(
    db,
    sql`SELECT a.address, a.next_nonce FROM relayer_accounts a WHERE ${relayerInService(sql`a.address`)} ORDER BY a.address`,
  );
  return rows.map((r) => ({ address: r.address, nextNonce: Number(r.next_nonce) }));
}
