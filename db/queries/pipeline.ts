import { sql, type SQL } from "drizzle-orm";
import type { EligibilityReason, RelayStatus, RequestStatus } from "@/db/schema";
import type { Executor, Transaction } from "./executor";

/**
 * The worker's queue operations on sponsorship_requests, relay_transactions and relayer_nonce_fills
 * (decisions.md "Pipeline"). Every status change of a request sets status_actor and status_reason (the audit
 * trigger copies them) and is guarded by `WHERE status = <from>`; the triggers of migration 0001 refuse any
 * illegal move anyway. Batches are single statements over VALUES lists, so a batch costs one round trip.
 */

type Address = `0x${string}`;
type Hex = `0x${string}`;

const values = (rows: SQL[]) => sql.join(rows, sql`, `);
/** `(p1, p2, ...)` for `IN`: one parameter per item. */
const list = (items: readonly string[]) => sql`(${sql.join(
  items.map((i) => sql`${i}`),
  sql`, `,
)})`;

/** A request's status and timestamps after a change (for the worker's stage metrics). */
export type RequestTimes = {
  id: string;
  status: RequestStatus;
  requestedAt: Date;
  approvedAt: Date | null;
  rejectedAt: Date | null;
  relayedAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
};
type RequestTimesRow = {
  id: string;
  status: RequestStatus;
  requested_at: Date | string;
  approved_at: Date | string | null;
  rejected_at: Date | string | null;
  relayed_at: Date | string | null;
  completed_at: Date | string | null;
  failed_at: Date | string | null;
};
const TIMES = sql.raw("r.id, r.status, r.requested_at, r.approved_at, r.rejected_at, r.relayed_at, r.completed_at, r.failed_at");
const date = (v: Date | string | null) => (v === null ? null : new Date(v));
const toTimes = (r: RequestTimesRow): RequestTimes => ({
  id: r.id,
  status: r.status,
  requestedAt: new Date(r.requested_at),
  approvedAt: date(r.approved_at),
  rejectedAt: date(r.rejected_at),
  relayedAt: date(r.relayed_at),
  completedAt: date(r.completed_at),
  failedAt: date(r.failed_at),
});

/* ------------------------------------------------------------------ review */

export type PendingRequestClaim = {
  id: string;
  walletAddress: Address;
  /** An administrator or automatic block is active for the wallet at `now`. */
  blocked: boolean;
};

/**
 * Claims up to `limit` pending requests that are due, oldest first, locking them until the transaction ends
 * (`FOR UPDATE SKIP LOCKED`: another worker skips them instead of waiting). The block check rides along.
 */
export async function claimPendingRequests(tx: Transaction, limit: number, now: Date): Promise<PendingRequestClaim[]> {
  const rows = await tx.execute<{ id: string; wallet_address: string; blocked: boolean }>(sql`
    SELECT r.id, r.wallet_address,
      EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = r.wallet_address AND b.lifted_at IS NULL
          AND (b.expires_at IS NULL OR b.expires_at > ${now.toISOString()}::timestamptz)
      ) AS blocked
    FROM sponsorship_requests r
    WHERE r.status = 'pending' AND r.available_at <= now()
    ORDER BY r.requested_at, r.id
    LIMIT ${limit}
    FOR UPDATE OF r SKIP LOCKED`);
  return rows.map((r) => ({ id: r.id, walletAddress: r.wallet_address as Address, blocked: r.blocked }));
}

export type ReviewDecision = { id: string; status: "approved" | "rejected"; reason: EligibilityReason };

/** pending -> approved | rejected, with the eligibility reason. Returns the requests moved. */
export async function applyReviewDecisions(tx: Executor, decisions: readonly ReviewDecision[], actor: string): Promise<RequestTimes[]> {
  if (decisions.length === 0) return [];
  const rows = values(decisions.map((d) => sql`(${d.id}::uuid, ${d.status}::request_status, ${d.reason}::eligibility_reason)`));
  const result = await tx.execute<RequestTimesRow>(sql`
    UPDATE sponsorship_requests r SET
      status = v.status,
      eligibility_reason = v.reason,
      approved_at = CASE WHEN v.status = 'approved' THEN now() ELSE r.approved_at END,
      rejected_at = CASE WHEN v.status = 'rejected' THEN now() ELSE r.rejected_at END,
      status_actor = ${actor},
      status_reason = v.reason::text
    FROM (VALUES ${rows}) AS v(id, status, reason)
    WHERE r.id = v.id AND r.status = 'pending'
    RETURNING ${TIMES}`);
  return result.map(toTimes);
}

/* ------------------------------------------------------------------- relay */

export type RelayCandidate = {
  id: string;
  walletAddress: Address;
  status: Extract<RequestStatus, "approved" | "relayed">;
  /** Attempts made so far (0 for an approved request). */
  attempts: number;
};

/**
 * Claims requests that need a relay attempt: approved ones (first attempt) and relayed ones whose every attempt
 * has failed (the next attempt, e.g. after a revert or once an underfunded treasury is refilled). Locked with
 * SKIP LOCKED, then re-read in a second statement: in READ COMMITTED that statement sees every attempt committed
 * before the lock was granted, so two workers can never create the same attempt (every transaction that creates
 * an attempt holds the request's row lock).
 */
export async function claimRelayCandidates(tx: Transaction, limit: number): Promise<RelayCandidate[]> {
  const locked = await tx.execute<{ id: string }>(sql`
    SELECT r.id FROM sponsorship_requests r
    WHERE r.available_at <= now()
      AND (r.status = 'approved'
        OR (r.status = 'relayed' AND NOT EXISTS (
          SELECT 1 FROM relay_transactions t
          WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted'))))
    ORDER BY r.status DESC, r.approved_at, r.id
    LIMIT ${limit}
    FOR UPDATE OF r SKIP LOCKED`);
  if (locked.length === 0) return [];
  const rows = await tx.execute<{ id: string; wallet_address: string; status: "approved" | "relayed"; attempts: number; open: boolean }>(sql`
    SELECT r.id, r.wallet_address, r.status,
      COALESCE((SELECT max(t.relay_attempt) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id), 0)::int AS attempts,
      EXISTS (SELECT 1 FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted')) AS open
    FROM sponsorship_requests r
    WHERE r.id IN ${list(locked.map((l) => l.id))}
    ORDER BY r.approved_at, r.id`);
  return rows
    .filter((r) => !r.open && (r.status === "approved" || r.status === "relayed"))
    .map((r) => ({ id: r.id, walletAddress: r.wallet_address as Address, status: r.status, attempts: r.attempts }));
}

export type NewRelayAttempt = {
  sponsorshipRequestId: string;
  relayAttempt: number;
  relayerAddress: Address;
  nonce: number;
  transactionHash: Hex;
  rawTransaction: Hex;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gasLimit: bigint;
};

/** Stores signed attempts (status queued) before anything is broadcast. Returns their ids by hash. */
export async function insertRelayAttempts(tx: Executor, attempts: readonly NewRelayAttempt[]): Promise<Map<string, string>> {
  if (attempts.length === 0) return new Map();
  const rows = values(
    attempts.map(
      (a) =>
        sql`(${a.sponsorshipRequestId}::uuid, ${a.relayAttempt}::int, ${a.relayerAddress}, ${a.nonce}::bigint, ${a.transactionHash}, ${a.rawTransaction}, ${a.maxFeePerGas.toString()}::numeric, ${a.maxPriorityFeePerGas.toString()}::numeric, ${a.gasLimit.toString()}::numeric)`,
    ),
  );
  const result = await tx.execute<{ id: string; transaction_hash: string }>(sql`
    INSERT INTO relay_transactions
      (sponsorship_request_id, relay_attempt, relayer_address, nonce, transaction_hash, raw_transaction, max_fee_per_gas, max_priority_fee_per_gas, gas_limit)
    VALUES ${rows}
    RETURNING id, transaction_hash`);
  return new Map(result.map((r) => [r.transaction_hash, r.id]));
}

/** approved -> relayed for requests whose first attempt has just been stored. */
export async function markRequestsRelayed(tx: Executor, ids: readonly string[], actor: string, reason: string): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await tx.execute(sql`
    UPDATE sponsorship_requests SET status = 'relayed', relayed_at = now(), status_actor = ${actor}, status_reason = ${reason}
    WHERE id IN ${list(ids)} AND status = 'approved'
    RETURNING id`);
  return result.length;
}

/** Locks one request row (every transaction that adds an attempt or a fill for a request holds it). */
export async function lockRequest(tx: Transaction, id: string): Promise<{ status: RequestStatus; attempts: number } | undefined> {
  const [row] = await tx.execute<{ status: RequestStatus }>(sql`SELECT status FROM sponsorship_requests WHERE id = ${id} FOR UPDATE`);
  if (!row) return undefined;
  const [a] = await tx.execute<{ attempts: number }>(sql`
    SELECT COALESCE(max(relay_attempt), 0)::int AS attempts FROM relay_transactions WHERE sponsorship_request_id = ${id}`);
  return { status: row.status, attempts: a?.attempts ?? 0 };
}

/** Attempts of a request still queued or submitted: each of them could still be mined and pay the wallet. */
export async function countOpenAttempts(tx: Executor, id: string): Promise<number> {
  const [row] = await tx.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM relay_transactions WHERE sponsorship_request_id = ${id} AND status IN ('queued', 'submitted')`);
  return row?.n ?? 0;
}

/* ------------------------------------------------ broadcast bookkeeping */

/** queued -> submitted (first broadcast accepted) for relays and fills, by hash. */
export async function markBroadcastAccepted(tx: Executor, hashes: readonly string[]): Promise<void> {
  if (hashes.length === 0) return;
  await tx.execute(sql`
    UPDATE relay_transactions SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash IN ${list(hashes)} AND status = 'queued'`);
  await tx.execute(sql`
    UPDATE relayer_nonce_fills SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash IN ${list(hashes)} AND status = 'queued'`);
}

/* ------------------------------------------------------------------ confirm */

/** A stored transaction (relay attempt or nonce fill) at a nonce that is not settled yet. */
export type OpenNonceTransaction = {
  kind: "relay" | "fill";
  id: string;
  relayerAddress: Address;
  nonce: number;
  status: RelayStatus;
  transactionHash: Hex;
  rawTransaction: Hex;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  createdAt: Date;
  /** Milliseconds since the first accepted broadcast (database clock), null while queued. */
  submittedAgeMs: number | null;
  /** The request (for a fill: the request whose attempt it cancels, if any). */
  sponsorshipRequestId: string | null;
  relayAttempt: number | null;
  requestStatus: RequestStatus | null;
  walletAddress: Address | null;
  /** The request's highest attempt number. */
  requestAttempts: number | null;
};

/**
 * Every stored transaction of the given relayers at a nonce where something is still queued or submitted
 * (a "nonce group": an attempt, its same-nonce replacements, a cancelling fill), ordered by relayer and nonce.
 */
export async function listOpenNonceGroups(db: Executor, relayers: readonly string[], limit = 5_000): Promise<OpenNonceTransaction[]> {
  if (relayers.length === 0) return [];
  const rows = await db.execute<{
    kind: "relay" | "fill";
    id: string;
    relayer_address: string;
    nonce: string;
    status: RelayStatus;
    transaction_hash: string;
    raw_transaction: string;
    max_fee_per_gas: string;
    max_priority_fee_per_gas: string;
    created_at: Date;
    submitted_age_ms: string | null;
    sponsorship_request_id: string | null;
    relay_attempt: number | null;
    request_status: RequestStatus | null;
    wallet_address: string | null;
    request_attempts: number | null;
  }>(sql`
    WITH open_nonces AS (
      (SELECT relayer_address, nonce FROM relay_transactions
        WHERE status IN ('queued', 'submitted') AND relayer_address IN ${list(relayers)}
        ORDER BY relayer_address, nonce LIMIT ${limit})
      UNION
      (SELECT relayer_address, nonce FROM relayer_nonce_fills
        WHERE status IN ('queued', 'submitted') AND relayer_address IN ${list(relayers)}
        ORDER BY relayer_address, nonce LIMIT ${limit})
    )
    SELECT 'relay' AS kind, t.id, t.relayer_address, t.nonce, t.status, t.transaction_hash, t.raw_transaction,
      t.max_fee_per_gas, t.max_priority_fee_per_gas, t.created_at,
      floor(extract(epoch FROM now() - t.submitted_at) * 1000)::bigint AS submitted_age_ms,
      t.sponsorship_request_id, t.relay_attempt, r.status AS request_status, r.wallet_address,
      (SELECT max(x.relay_attempt) FROM relay_transactions x WHERE x.sponsorship_request_id = t.sponsorship_request_id)::int AS request_attempts
    FROM relay_transactions t
    JOIN open_nonces o ON o.relayer_address = t.relayer_address AND o.nonce = t.nonce
    JOIN sponsorship_requests r ON r.id = t.sponsorship_request_id
    WHERE t.transaction_hash IS NOT NULL AND t.raw_transaction IS NOT NULL
    UNION ALL
    SELECT 'fill' AS kind, f.id, f.relayer_address, f.nonce, f.status, f.transaction_hash, f.raw_transaction,
      f.max_fee_per_gas, f.max_priority_fee_per_gas, f.created_at,
      floor(extract(epoch FROM now() - f.submitted_at) * 1000)::bigint AS submitted_age_ms,
      f.sponsorship_request_id, NULL::int, r.status, r.wallet_address,
      (SELECT max(x.relay_attempt) FROM relay_transactions x WHERE x.sponsorship_request_id = f.sponsorship_request_id)::int
    FROM relayer_nonce_fills f
    JOIN open_nonces o ON o.relayer_address = f.relayer_address AND o.nonce = f.nonce
    LEFT JOIN sponsorship_requests r ON r.id = f.sponsorship_request_id
    ORDER BY relayer_address, nonce, created_at`);
  return rows.map((r) => ({
    kind: r.kind,
    id: r.id,
    relayerAddress: r.relayer_address as Address,
    nonce: Number(r.nonce),
    status: r.status,
    transactionHash: r.transaction_hash as Hex,
    rawTransaction: r.raw_transaction as Hex,
    maxFeePerGas: BigInt(r.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(r.max_priority_fee_per_gas),
    createdAt: new Date(r.created_at),
    submittedAgeMs: r.submitted_age_ms === null ? null : Number(r.submitted_age_ms),
    sponsorshipRequestId: r.sponsorship_request_id,
    relayAttempt: r.relay_attempt,
    requestStatus: r.request_status,
    walletAddress: r.wallet_address as Address | null,
    requestAttempts: r.request_attempts,
  }));
}

export type MinedRelay = { id: string; blockNumber: bigint; gasUsed: bigint };

/**
 * A mined attempt becomes confirmed (from submitted, from queued when the worker died before recording the
 * broadcast, or from failed when it had been given up as stuck and replaced: whichever hash is mined wins).
 */
export async function confirmRelays(tx: Executor, mined: readonly MinedRelay[]): Promise<string[]> {
  if (mined.length === 0) return [];
  const ids = mined.map((m) => m.id);
  // The trigger allows queued -> submitted -> confirmed, not queued -> confirmed: record the broadcast first.
  await tx.execute(sql`
    UPDATE relay_transactions SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE id IN ${list(ids)} AND status = 'queued'`);
  const rows = values(mined.map((m) => sql`(${m.id}::uuid, ${m.blockNumber.toString()}::bigint, ${m.gasUsed.toString()}::numeric)`));
  const result = await tx.execute<{ sponsorship_request_id: string }>(sql`
    UPDATE relay_transactions t SET status = 'confirmed', confirmed_at = now(), block_number = v.block, gas_used = v.gas
    FROM (VALUES ${rows}) AS v(id, block, gas)
    WHERE t.id = v.id AND t.status IN ('submitted', 'failed')
    RETURNING t.sponsorship_request_id`);
  return result.map((r) => r.sponsorship_request_id);
}

export type RelayFailure = { id: string; reason: string };

/** queued/submitted -> failed with a readable reason. */
export async function failRelays(tx: Executor, failures: readonly RelayFailure[]): Promise<number> {
  if (failures.length === 0) return 0;
  const rows = values(failures.map((f) => sql`(${f.id}::uuid, ${f.reason})`));
  const result = await tx.execute(sql`
    UPDATE relay_transactions t SET status = 'failed', failed_at = now(), failure_reason = v.reason
    FROM (VALUES ${rows}) AS v(id, reason)
    WHERE t.id = v.id AND t.status IN ('queued', 'submitted')
    RETURNING t.id`);
  return result.length;
}

/** relayed -> completed. Returns the requests moved. */
export async function completeRequests(tx: Executor, ids: readonly string[], actor: string, reason: string): Promise<RequestTimes[]> {
  if (ids.length === 0) return [];
  const result = await tx.execute<RequestTimesRow>(sql`
    UPDATE sponsorship_requests r SET status = 'completed', completed_at = now(), status_actor = ${actor}, status_reason = ${reason}
    WHERE r.id IN ${list(ids)} AND r.status = 'relayed'
    RETURNING ${TIMES}`);
  return result.map(toTimes);
}

/** relayed -> failed, with the reason shown to clients. Returns the request, or undefined when not relayed. */
export async function failRequest(tx: Executor, id: string, actor: string, reason: string): Promise<RequestTimes | undefined> {
  const [row] = await tx.execute<RequestTimesRow>(sql`
    UPDATE sponsorship_requests r SET status = 'failed', failed_at = now(), failure_reason = ${reason}, status_actor = ${actor}, status_reason = ${reason}
    WHERE r.id = ${id} AND r.status = 'relayed'
    RETURNING ${TIMES}`);
  return row ? toTimes(row) : undefined;
}

/* ---------------------------------------------------------------- fills */

export type NewNonceFill = {
  relayerAddress: Address;
  nonce: number;
  sponsorshipRequestId: string | null;
  reason: string;
  transactionHash: Hex;
  rawTransaction: Hex;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
};

export async function insertNonceFill(tx: Executor, fill: NewNonceFill): Promise<string> {
  const [row] = await tx.execute<{ id: string }>(sql`
    INSERT INTO relayer_nonce_fills
      (relayer_address, nonce, sponsorship_request_id, reason, transaction_hash, raw_transaction, max_fee_per_gas, max_priority_fee_per_gas)
    VALUES (${fill.relayerAddress}, ${fill.nonce}, ${fill.sponsorshipRequestId}, ${fill.reason}, ${fill.transactionHash},
      ${fill.rawTransaction}, ${fill.maxFeePerGas.toString()}::numeric, ${fill.maxPriorityFeePerGas.toString()}::numeric)
    RETURNING id`);
  return row!.id;
}

export async function confirmNonceFill(tx: Executor, id: string, blockNumber: bigint): Promise<void> {
  await tx.execute(sql`
    UPDATE relayer_nonce_fills SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE id = ${id} AND status = 'queued'`);
  await tx.execute(sql`
    UPDATE relayer_nonce_fills SET status = 'confirmed', resolved_at = now(), block_number = ${blockNumber.toString()}::bigint
    WHERE id = ${id} AND status IN ('submitted', 'failed')`);
}

export async function failNonceFills(tx: Executor, failures: readonly RelayFailure[]): Promise<void> {
  if (failures.length === 0) return;
  const rows = values(failures.map((f) => sql`(${f.id}::uuid, ${f.reason})`));
  // A fill's `reason` says why it was sent; why it failed is appended.
  await tx.execute(sql`
    UPDATE relayer_nonce_fills f SET status = 'failed', resolved_at = now(), reason = f.reason || ' | failed: ' || v.reason
    FROM (VALUES ${rows}) AS v(id, reason)
    WHERE f.id = v.id AND f.status IN ('queued', 'submitted')`);
}

/* ------------------------------------------------------------ queue depth */

export type QueueDepths = { pending: number; approved: number; relayed: number };

export async function countOpenRequests(db: Executor): Promise<QueueDepths> {
  const rows = await db.execute<{ status: RequestStatus; n: number }>(sql`
    SELECT status, count(*)::int AS n FROM sponsorship_requests WHERE status IN ('pending', 'approved', 'relayed') GROUP BY status`);
  const depths: QueueDepths = { pending: 0, approved: 0, relayed: 0 };
  for (const r of rows) if (r.status in depths) depths[r.status as keyof QueueDepths] = r.n;
  return depths;
}

/** Relay attempts queued or submitted, over every relayer: each will take `amount` from the treasury if mined. */
export async function countOpenRelays(db: Executor): Promise<number> {
  const [row] = await db.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM relay_transactions WHERE status IN ('queued', 'submitted')`);
  return row?.n ?? 0;
}

/** The relay attempt that sent `hash` (any status), with its request. */
export async function findRelayByHash(db: Executor, hash: string): Promise<{ id: string; sponsorshipRequestId: string; status: RelayStatus } | undefined> {
  const [row] = await db.execute<{ id: string; sponsorship_request_id: string; status: RelayStatus }>(sql`
    SELECT id, sponsorship_request_id, status FROM relay_transactions WHERE transaction_hash = ${hash.toLowerCase()}`);
  return row ? { id: row.id, sponsorshipRequestId: row.sponsorship_request_id, status: row.status } : undefined;
}
