import { sql } from "drizzle-orm";
import type { EligibilityReason, RelayStatus, RequestStatus } from "@/db/schema";
import type { Executor, Transaction } from "@/db/sql/executor";
import { runStatement, runStatements, type Query, type Row } from "@/db/sql/pipelined";

/**
 * The worker's queue operations on sponsorship_requests, relay_transactions and relayer_nonce_fills
 * (decisions.md "Pipeline"). Every status change of a request sets status_actor and status_reason (the audit
 * trigger copies them) and is guarded by `WHERE status = <from>`; the triggers of migration 0001 refuse any
 * illegal move anyway. A batch is one statement over array parameters (`unnest`, `= ANY`), with a fixed text run as
 * a named prepared statement (db/queries/pipelined.ts). The `...Statement` builders let the worker send several of
 * them in one round trip (`pipelinedTransaction`); the plain functions run one statement (or a few together) on a
 * Drizzle transaction or the pool, for the rarer paths.
 */

type Address = `0x${string}`;
type Hex = `0x${string}`;

function query<T>(text: string, params: readonly unknown[], parse: (rows: Row[]) => T): Query<T> {
  return { text, params, parse };
}

async function run<T>(db: Executor, q: Query<T>): Promise<T> {
  return q.parse(await runStatement(db, q));
}

/** Runs queries of one transaction together (pipelined) and parses each answer. */
async function runQueries<const T extends readonly Query<unknown>[]>(
  db: Executor,
  queries: T,
): Promise<{ -readonly [K in keyof T]: T[K] extends Query<infer R> ? R : never }> {
  const answers = await runStatements(db, queries);
  return queries.map((q, i) => q.parse(answers[i]!)) as { -readonly [K in keyof T]: T[K] extends Query<infer R> ? R : never };
}

const none = (): undefined => undefined;

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
const TIMES = "r.id, r.status, r.requested_at, r.approved_at, r.rejected_at, r.relayed_at, r.completed_at, r.failed_at";
const date = (v: Date | string | null) => (v === null ? null : new Date(v));
const toTimes = (row: Row): RequestTimes => {
  const r = row as RequestTimesRow;
  return {
  id: r.id,
  status: r.status,
  requestedAt: new Date(r.requested_at),
  approvedAt: date(r.approved_at),
  rejectedAt: date(r.rejected_at),
  relayedAt: date(r.relayed_at),
  completedAt: date(r.completed_at),
  failedAt: date(r.failed_at),
  };
};

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
const CLAIM_PENDING = `
    SELECT r.id, r.wallet_address,
      EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = r.wallet_address AND b.lifted_at IS NULL
          AND (b.expires_at IS NULL OR b.expires_at > $1::timestamptz)
      ) AS blocked
    FROM sponsorship_requests r
    WHERE r.status = 'pending' AND r.available_at <= now()
    ORDER BY r.requested_at, r.id
    LIMIT $2::int
    FOR UPDATE OF r SKIP LOCKED`;

export function claimPendingRequestsStatement(limit: number, now: Date): Query<PendingRequestClaim[]> {
  return query(CLAIM_PENDING, [now.toISOString(), limit], (rows) =>
    (rows as { id: string; wallet_address: string; blocked: boolean }[]).map((r) => ({ id: r.id, walletAddress: r.wallet_address as Address, blocked: r.blocked })),
  );
}


export type ReviewDecision = { id: string; status: "approved" | "rejected"; reason: EligibilityReason };

/** pending -> approved | rejected, with the eligibility reason. Returns the requests moved. */
const APPLY_REVIEW = `
    UPDATE sponsorship_requests r SET
      status = v.status::request_status,
      eligibility_reason = v.reason::eligibility_reason,
      approved_at = CASE WHEN v.status = 'approved' THEN now() ELSE r.approved_at END,
      rejected_at = CASE WHEN v.status = 'rejected' THEN now() ELSE r.rejected_at END,
      status_actor = $4,
      status_reason = v.reason
    FROM unnest($1::uuid[], $2::text[], $3::text[]) AS v(id, status, reason)
    WHERE r.id = v.id AND r.status = 'pending'
    RETURNING ${TIMES}`;

export function applyReviewDecisionsStatement(decisions: readonly ReviewDecision[], actor: string): Query<RequestTimes[]> {
  return query(APPLY_REVIEW, [decisions.map((d) => d.id), decisions.map((d) => d.status), decisions.map((d) => d.reason), actor], (rows) => rows.map(toTimes));
}


/* ------------------------------------------------------------------- relay */

export type RelayCandidate = {
  id: string;
  walletAddress: Address;
  status: Extract<RequestStatus, "approved" | "relayed">;
  /** The highest attempt number so far (0 for an approved request): the next attempt is numbered after it. */
  attempts: number;
  /**
   * Attempts that count against MAX_RELAY_ATTEMPTS: all but those that failed for the service's own state
   * (SERVICE_STATE_FAILURE: treasury paused or short, relayer not authorised), which burn none (decisions.md,
   * "Wallets that cannot be paid").
   */
  burned: number;
};

/** The failure_reason prefix of an attempt that reverted for the service's own state; it burns no attempt. */
export const SERVICE_STATE_FAILURE = "service_state:";

/**
 * Claims requests that need a relay attempt: approved ones (first attempt) and relayed ones whose every attempt
 * has failed (the next attempt, e.g. after a revert or once an underfunded treasury is refilled). Locked with
 * SKIP LOCKED, then re-read in a second statement: in READ COMMITTED that statement sees every attempt committed
 * before the lock was granted, so two workers can never create the same attempt (every transaction that creates
 * an attempt holds the request's row lock).
 */
const LOCK_RELAY_CANDIDATES = `
    SELECT r.id FROM sponsorship_requests r
    WHERE r.available_at <= now()
      AND (r.status = 'approved'
        OR (r.status = 'relayed' AND NOT EXISTS (
          SELECT 1 FROM relay_transactions t
          WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted'))))
    ORDER BY r.status DESC, r.approved_at, r.id
    LIMIT $1::int
    FOR UPDATE OF r SKIP LOCKED`;

const READ_RELAY_CANDIDATES = `
    SELECT r.id, r.wallet_address, r.status,
      COALESCE((SELECT max(t.relay_attempt) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id), 0)::int AS attempts,
      (SELECT count(*) FROM relay_transactions t
        WHERE t.sponsorship_request_id = r.id AND NOT (t.status = 'failed' AND t.failure_reason LIKE 'service_state:%'))::int AS burned,
      EXISTS (SELECT 1 FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted')) AS open
    FROM sponsorship_requests r
    WHERE r.id = ANY($1::uuid[])
    ORDER BY r.approved_at, r.id`;

/** The first half of `claimRelayCandidates`: locks (SKIP LOCKED) the requests that look like they need an attempt. */
export function lockRelayCandidatesStatement(limit: number): Query<string[]> {
  return query(LOCK_RELAY_CANDIDATES, [limit], (rows) => rows.map((r) => r.id as string));
}

/**
 * The second half, a later statement of the same transaction: re-reads the locked requests (READ COMMITTED: a new
 * snapshot, taken after the locks were granted) and keeps those that still need an attempt.
 */
export function readRelayCandidatesStatement(lockedIds: readonly string[]): Query<RelayCandidate[]> {
  return query(READ_RELAY_CANDIDATES, [lockedIds], (rows) =>
    (rows as { id: string; wallet_address: string; status: RequestStatus; attempts: number; burned: number; open: boolean }[])
      .filter((r): r is typeof r & { status: "approved" | "relayed" } => !r.open && (r.status === "approved" || r.status === "relayed"))
      .map((r) => ({ id: r.id, walletAddress: r.wallet_address as Address, status: r.status, attempts: r.attempts, burned: r.burned })),
  );
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
// numeric[] parameters travel as text[] (cast in SQL): Drizzle's postgres.js driver replaces postgres.js's numeric[]
// serializer with the identity, so a JS array would not be serialised.
const INSERT_RELAY_ATTEMPTS = `
    INSERT INTO relay_transactions
      (sponsorship_request_id, relay_attempt, relayer_address, nonce, transaction_hash, raw_transaction, max_fee_per_gas, max_priority_fee_per_gas, gas_limit)
    SELECT v.request, v.attempt, v.relayer, v.nonce, v.hash, v.raw, v.max_fee::numeric, v.priority_fee::numeric, v.gas_limit::numeric
    FROM unnest($1::uuid[], $2::int[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
      AS v(request, attempt, relayer, nonce, hash, raw, max_fee, priority_fee, gas_limit)
    RETURNING id, transaction_hash`;

/** Stores signed attempts (status queued) before anything is broadcast; the answer maps hash to id. */
export function insertRelayAttemptsStatement(attempts: readonly NewRelayAttempt[]): Query<Map<string, string>> {
  return query(
    INSERT_RELAY_ATTEMPTS,
    [
      attempts.map((a) => a.sponsorshipRequestId),
      attempts.map((a) => a.relayAttempt),
      attempts.map((a) => a.relayerAddress),
      attempts.map((a) => String(a.nonce)),
      attempts.map((a) => a.transactionHash),
      attempts.map((a) => a.rawTransaction),
      attempts.map((a) => a.maxFeePerGas.toString()),
      attempts.map((a) => a.maxPriorityFeePerGas.toString()),
      attempts.map((a) => a.gasLimit.toString()),
    ],
    (rows) => new Map(rows.map((r) => [r.transaction_hash as string, r.id as string])),
  );
}

/** Stores signed attempts (status queued) before anything is broadcast. Returns their ids by hash. */
export async function insertRelayAttempts(tx: Executor, attempts: readonly NewRelayAttempt[]): Promise<Map<string, string>> {
  if (attempts.length === 0) return new Map();
  return run(tx, insertRelayAttemptsStatement(attempts));
}

/** approved -> relayed for requests whose first attempt has just been stored. */
const MARK_RELAYED = `
    UPDATE sponsorship_requests SET status = 'relayed', relayed_at = now(), status_actor = $2, status_reason = $3
    WHERE id = ANY($1::uuid[]) AND status = 'approved'
    RETURNING id`;

export function markRequestsRelayedStatement(ids: readonly string[], actor: string, reason: string): Query<number> {
  return query(MARK_RELAYED, [ids, actor, reason], (rows) => rows.length);
}


/** Locks one request row (every transaction that adds an attempt or a fill for a request holds it). */
/** Locks a request; `attempts` are those that count against MAX_RELAY_ATTEMPTS (see RelayCandidate.burned). */
export async function lockRequest(tx: Transaction, id: string): Promise<{ status: RequestStatus; attempts: number } | undefined> {
  const [row] = await tx.execute<{ status: RequestStatus }>(sql`SELECT status FROM sponsorship_requests WHERE id = ${id} FOR UPDATE`);
  if (!row) return undefined;
  const [a] = await tx.execute<{ attempts: number }>(sql`
    SELECT count(*)::int AS attempts FROM relay_transactions
    WHERE sponsorship_request_id = ${id} AND NOT (status = 'failed' AND failure_reason LIKE ${SERVICE_STATE_FAILURE + "%"})`);
  return { status: row.status, attempts: a?.attempts ?? 0 };
}

/** Whether a stored transaction (relay attempt or fill) is still queued or submitted; locks its row. */
export async function lockIfOpen(tx: Transaction, kind: "relay" | "fill", id: string): Promise<boolean> {
  const rows =
    kind === "relay"
      ? await tx.execute(sql`SELECT 1 FROM relay_transactions WHERE id = ${id} AND status IN ('queued', 'submitted') FOR UPDATE`)
      : await tx.execute(sql`SELECT 1 FROM relayer_nonce_fills WHERE id = ${id} AND status IN ('queued', 'submitted') FOR UPDATE`);
  return rows.length > 0;
}

/** Attempts of a request still queued or submitted: each of them could still be mined and pay the wallet. */
export async function countOpenAttempts(tx: Executor, id: string): Promise<number> {
  const [row] = await tx.execute<{ n: number }>(sql`
    SELECT count(*)::int AS n FROM relay_transactions WHERE sponsorship_request_id = ${id} AND status IN ('queued', 'submitted')`);
  return row?.n ?? 0;
}

/* ------------------------------------------------ broadcast bookkeeping */

const RELAYS_SUBMITTED = `
    UPDATE relay_transactions SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash = ANY($1::text[]) AND status = 'queued'`;
const FILLS_SUBMITTED = `
    UPDATE relayer_nonce_fills SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash = ANY($1::text[]) AND status = 'queued'`;

/** queued -> submitted (first broadcast accepted) for relay attempts, by hash. */
export function markRelaysSubmittedStatement(hashes: readonly string[]): Query<undefined> {
  return query(RELAYS_SUBMITTED, [hashes], none);
}

/** queued -> submitted (first broadcast accepted) for nonce fills, by hash. */
export function markFillsSubmittedStatement(hashes: readonly string[]): Query<undefined> {
  return query(FILLS_SUBMITTED, [hashes], none);
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
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  createdAt: Date;
  /** Milliseconds since the first accepted broadcast (database clock), null while queued. */
  submittedAgeMs: number | null;
  /** Milliseconds since it was stored (database clock). */
  createdAgeMs: number;
  /** The request (for a fill: the request whose attempt it cancels, if any). */
  sponsorshipRequestId: string | null;
  relayAttempt: number | null;
  requestStatus: RequestStatus | null;
  walletAddress: Address | null;
  /** The request's highest attempt number. */
  requestAttempts: number | null;
};

const OPEN_NONCE_GROUPS = `
    WITH open_nonces AS (
      (SELECT relayer_address, nonce FROM relay_transactions
        WHERE status IN ('queued', 'submitted') AND relayer_address = ANY($1::text[])
        ORDER BY relayer_address, nonce LIMIT $2::int)
      UNION
      (SELECT relayer_address, nonce FROM relayer_nonce_fills
        WHERE status IN ('queued', 'submitted') AND relayer_address = ANY($1::text[])
        ORDER BY relayer_address, nonce LIMIT $2::int)
    )
    SELECT 'relay' AS kind, t.id, t.relayer_address, t.nonce, t.status, t.transaction_hash,
      t.max_fee_per_gas, t.max_priority_fee_per_gas, t.created_at,
      floor(extract(epoch FROM now() - t.submitted_at) * 1000)::bigint AS submitted_age_ms,
      floor(extract(epoch FROM now() - t.created_at) * 1000)::bigint AS created_age_ms,
      t.sponsorship_request_id, t.relay_attempt, r.status AS request_status, r.wallet_address,
      (SELECT max(x.relay_attempt) FROM relay_transactions x WHERE x.sponsorship_request_id = t.sponsorship_request_id)::int AS request_attempts
    FROM relay_transactions t
    JOIN open_nonces o ON o.relayer_address = t.relayer_address AND o.nonce = t.nonce
    JOIN sponsorship_requests r ON r.id = t.sponsorship_request_id
    WHERE t.transaction_hash IS NOT NULL AND t.raw_transaction IS NOT NULL
    UNION ALL
    SELECT 'fill' AS kind, f.id, f.relayer_address, f.nonce, f.status, f.transaction_hash,
      f.max_fee_per_gas, f.max_priority_fee_per_gas, f.created_at,
      floor(extract(epoch FROM now() - f.submitted_at) * 1000)::bigint AS submitted_age_ms,
      floor(extract(epoch FROM now() - f.created_at) * 1000)::bigint AS created_age_ms,
      f.sponsorship_request_id, NULL::int, r.status, r.wallet_address,
      (SELECT max(x.relay_attempt) FROM relay_transactions x WHERE x.sponsorship_request_id = f.sponsorship_request_id)::int
    FROM relayer_nonce_fills f
    JOIN open_nonces o ON o.relayer_address = f.relayer_address AND o.nonce = f.nonce
    LEFT JOIN sponsorship_requests r ON r.id = f.sponsorship_request_id
    ORDER BY relayer_address, nonce, created_at`;

/**
 * Every stored transaction of the given relayers at a nonce where something is still queued or submitted
 * (a "nonce group": an attempt, its same-nonce replacements, a cancelling fill), ordered by relayer and nonce.
 * Without the raw bytes: `readRawTransactions` reads them for the few that are broadcast again.
 */
export async function listOpenNonceGroups(db: Executor, relayers: readonly string[], limit = 5_000): Promise<OpenNonceTransaction[]> {
  if (relayers.length === 0) return [];
  const rows = (await runStatement(db, { text: OPEN_NONCE_GROUPS, params: [relayers, limit] })) as {
    kind: "relay" | "fill";
    id: string;
    relayer_address: string;
    nonce: string;
    status: RelayStatus;
    transaction_hash: string;
    max_fee_per_gas: string;
    max_priority_fee_per_gas: string;
    created_at: Date;
    submitted_age_ms: string | null;
    created_age_ms: string;
    sponsorship_request_id: string | null;
    relay_attempt: number | null;
    request_status: RequestStatus | null;
    wallet_address: string | null;
    request_attempts: number | null;
  }[];
  return rows.map((r) => ({
    kind: r.kind,
    id: r.id,
    relayerAddress: r.relayer_address as Address,
    nonce: Number(r.nonce),
    status: r.status,
    transactionHash: r.transaction_hash as Hex,
    maxFeePerGas: BigInt(r.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(r.max_priority_fee_per_gas),
    createdAt: new Date(r.created_at),
    submittedAgeMs: r.submitted_age_ms === null ? null : Number(r.submitted_age_ms),
    createdAgeMs: Number(r.created_age_ms),
    sponsorshipRequestId: r.sponsorship_request_id,
    relayAttempt: r.relay_attempt,
    requestStatus: r.request_status,
    walletAddress: r.wallet_address as Address | null,
    requestAttempts: r.request_attempts,
  }));
}

const RAW_TRANSACTIONS = `
    SELECT transaction_hash, raw_transaction FROM relay_transactions WHERE transaction_hash = ANY($1::text[]) AND raw_transaction IS NOT NULL
    UNION ALL
    SELECT transaction_hash, raw_transaction FROM relayer_nonce_fills WHERE transaction_hash = ANY($1::text[])`;

/** The stored raw bytes of transactions, by hash (relays and fills). */
export async function readRawTransactions(db: Executor, hashes: readonly string[]): Promise<Map<Hex, Hex>> {
  if (hashes.length === 0) return new Map();
  const rows = await runStatement(db, { text: RAW_TRANSACTIONS, params: [hashes] });
  return new Map(rows.map((r) => [r.transaction_hash as Hex, r.raw_transaction as Hex]));
}

export type MinedRelay = { id: string; blockNumber: bigint; gasUsed: bigint };

/**
 * A mined attempt becomes confirmed (from submitted, from queued when the worker died before recording the
 * broadcast, or from failed when it had been given up as stuck and replaced: whichever hash is mined wins).
 */
const RELAYS_SUBMITTED_BY_ID = `
    UPDATE relay_transactions SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE id = ANY($1::uuid[]) AND status = 'queued'`;
const CONFIRM_RELAYS = `
    UPDATE relay_transactions t SET status = 'confirmed', confirmed_at = now(), block_number = v.block, gas_used = v.gas::numeric
    FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS v(id, block, gas)
    WHERE t.id = v.id AND t.status IN ('submitted', 'failed')
    RETURNING t.sponsorship_request_id`;

/**
 * `confirmRelays` as two statements to send together: the first records the broadcast of attempts still queued
 * (the trigger allows queued -> submitted -> confirmed, not queued -> confirmed); the second answers the requests
 * of the attempts it confirmed.
 */
export function confirmRelaysStatements(mined: readonly MinedRelay[]): [Query<undefined>, Query<string[]>] {
  return [
    query(RELAYS_SUBMITTED_BY_ID, [mined.map((m) => m.id)], none),
    query(CONFIRM_RELAYS, [mined.map((m) => m.id), mined.map((m) => m.blockNumber.toString()), mined.map((m) => m.gasUsed.toString())], (rows) =>
      rows.map((r) => r.sponsorship_request_id as string),
    ),
  ];
}

/** Two statements that belong together (the second reads what the first did): only inside a transaction. */
export async function confirmRelays(tx: Transaction, mined: readonly MinedRelay[]): Promise<string[]> {
  if (mined.length === 0) return [];
  const [, requestIds] = await runQueries(tx, confirmRelaysStatements(mined));
  return requestIds;
}

export type RelayFailure = { id: string; reason: string };

/** queued/submitted -> failed with a readable reason. */
const FAIL_RELAYS = `
    UPDATE relay_transactions t SET status = 'failed', failed_at = now(), failure_reason = v.reason
    FROM unnest($1::uuid[], $2::text[]) AS v(id, reason)
    WHERE t.id = v.id AND t.status IN ('queued', 'submitted')
    RETURNING t.id`;

export function failRelaysStatement(failures: readonly RelayFailure[]): Query<number> {
  return query(FAIL_RELAYS, [failures.map((f) => f.id), failures.map((f) => f.reason)], (rows) => rows.length);
}

export async function failRelays(tx: Executor, failures: readonly RelayFailure[]): Promise<number> {
  if (failures.length === 0) return 0;
  return run(tx, failRelaysStatement(failures));
}

/** relayed -> completed. Returns the requests moved. */
const COMPLETE_REQUESTS = `
    UPDATE sponsorship_requests r SET status = 'completed', completed_at = now(), status_actor = $2, status_reason = $3
    WHERE r.id = ANY($1::uuid[]) AND r.status = 'relayed'
    RETURNING ${TIMES}`;
const COMPLETE_REQUESTS_OF_CONFIRMED = `
    UPDATE sponsorship_requests r SET status = 'completed', completed_at = now(), status_actor = $2, status_reason = $3
    WHERE r.id IN (SELECT t.sponsorship_request_id FROM relay_transactions t WHERE t.id = ANY($1::uuid[]) AND t.status = 'confirmed')
      AND r.status = 'relayed'
    RETURNING ${TIMES}`;

export async function completeRequests(tx: Executor, ids: readonly string[], actor: string, reason: string): Promise<RequestTimes[]> {
  if (ids.length === 0) return [];
  return run(tx, query(COMPLETE_REQUESTS, [ids, actor, reason], (rows) => rows.map(toTimes)));
}

/**
 * relayed -> completed for the requests of the given attempts that are confirmed: sent behind
 * `confirmRelaysStatements` in the same transaction, it completes exactly the requests whose attempt that
 * statement confirmed (or had confirmed before), without waiting for its answer.
 */
export function completeRequestsOfConfirmedStatement(relayIds: readonly string[], actor: string, reason: string): Query<RequestTimes[]> {
  return query(COMPLETE_REQUESTS_OF_CONFIRMED, [relayIds, actor, reason], (rows) => rows.map(toTimes));
}

const FAIL_REQUEST = `
    UPDATE sponsorship_requests r SET status = 'failed', failed_at = now(), failure_reason = $3, status_actor = $2, status_reason = $3
    WHERE r.id = $1::uuid AND r.status = 'relayed'
    RETURNING ${TIMES}`;

export function failRequestStatement(id: string, actor: string, reason: string): Query<RequestTimes | undefined> {
  return query(FAIL_REQUEST, [id, actor, reason], (rows) => (rows[0] ? toTimes(rows[0]) : undefined));
}

/** relayed -> failed, with the reason shown to clients. Returns the request, or undefined when not relayed. */
export function failRequest(tx: Executor, id: string, actor: string, reason: string): Promise<RequestTimes | undefined> {
  return run(tx, failRequestStatement(id, actor, reason));
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

// A fill's `reason` says why it was sent; why it failed is appended.
const FAIL_NONCE_FILLS = `
    UPDATE relayer_nonce_fills f SET status = 'failed', resolved_at = now(), reason = f.reason || ' | failed: ' || v.reason
    FROM unnest($1::uuid[], $2::text[]) AS v(id, reason)
    WHERE f.id = v.id AND f.status IN ('queued', 'submitted')`;

export function failNonceFillsStatement(failures: readonly RelayFailure[]): Query<undefined> {
  return query(FAIL_NONCE_FILLS, [failures.map((f) => f.id), failures.map((f) => f.reason)], none);
}

export async function failNonceFills(tx: Executor, failures: readonly RelayFailure[]): Promise<void> {
  if (failures.length === 0) return;
  await run(tx, failNonceFillsStatement(failures));
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

/**
 * Requests with a relay attempt queued or submitted, over every relayer: each will take `amount` from the treasury
 * if mined (once: a replaced attempt and its replacement at one nonce, or any two attempts of a request, pay once).
 */
const PAUSE_STATE = `SELECT paused, pause_reason FROM service_state WHERE id = 1`;

/** The administrator's pause (decisions.md, "Pause"): while set, the relay stage sends no new relay transaction. */
export function pauseStateStatement(): Query<{ paused: boolean; reason: string | null }> {
  return query(PAUSE_STATE, [], (rows) => ({ paused: rows[0]?.paused === true, reason: (rows[0]?.pause_reason as string | null | undefined) ?? null }));
}

const COUNT_OPEN_RELAYS = `SELECT count(DISTINCT sponsorship_request_id)::int AS n FROM relay_transactions WHERE status IN ('queued', 'submitted')`;

export function countOpenRelaysStatement(): Query<number> {
  return query(COUNT_OPEN_RELAYS, [], (rows) => (rows[0]?.n as number | undefined) ?? 0);
}


/** The relay attempt that sent `hash` (any status), with its request. */
export async function findRelayByHash(db: Executor, hash: string): Promise<{ id: string; sponsorshipRequestId: string; status: RelayStatus } | undefined> {
  const [row] = await db.execute<{ id: string; sponsorship_request_id: string; status: RelayStatus }>(sql`
    SELECT id, sponsorship_request_id, status FROM relay_transactions WHERE transaction_hash = ${hash.toLowerCase()}`);
  return row ? { id: row.id, sponsorshipRequestId: row.sponsorship_request_id, status: row.status } : undefined;
}
