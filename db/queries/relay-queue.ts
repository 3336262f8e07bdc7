import type { Address, Hex } from "viem";
import type { RequestStatus } from "@/db/schema";
import { query, type Query } from "@/db/sql/run";
import { TIMES, toTimes, type RequestTimes } from "./request-times";

/**
 * The relay stage's queue operations (decisions.md "Pipeline"): claim the requests that need an attempt, store the
 * signed attempts, move approved -> relayed; the pause and the relays in flight it reads with them. A batch is one
 * statement over array parameters (`unnest`, `= ANY`) with a fixed text, so the stage sends several in one round
 * trip (db/sql/transaction.ts).
 */

export type RelayCandidate = {
  id: string;
  walletAddress: Address;
  status: Extract<RequestStatus, "approved" | "relayed">;
  /** The highest attempt number so far (0 for an approved request): the next attempt is numbered after it. */
  attempts: number;
  /** Attempts that count against MAX_RELAY_ATTEMPTS (COUNTS_AS_BURNED). */
  burned: number;
};

/** The failure_reason prefix of an attempt that reverted for the service's own state; it burns no attempt. */
export const SERVICE_STATE_FAILURE = "service_state:";

/** The failure_reason prefix of an attempt a node refused for good before any node took it (it burns one). */
export const REFUSED_BEFORE_BROADCAST = "rejected by the node before broadcast:";

/**
 * Whether a relay_transactions row counts against MAX_RELAY_ATTEMPTS (SQL over its columns). Two kinds burn none
 * (decisions.md "Pipeline": errors before anything was broadcast consume no attempt):
 * - a revert of the service's own state (SERVICE_STATE_FAILURE: treasury paused or short, relayer not authorised);
 * - an attempt no node ever took (`submitted_at` unset; a mined one is recorded as broadcast when it is settled,
 *   markRelaysMined, even if the node's answer to its broadcast was lost), still queued or closed without a node's refusal: one
 *   re-priced because the base fee rose above its max fee before its first broadcast got through, then superseded
 *   at its nonce. One a node refused for good does burn one: otherwise a transaction no node accepts would be
 *   signed again for ever.
 */
export const COUNTS_AS_BURNED = `NOT (status = 'failed' AND failure_reason LIKE '${SERVICE_STATE_FAILURE}%')
      AND NOT (submitted_at IS NULL AND (status = 'queued' OR (status = 'failed' AND failure_reason NOT LIKE '${REFUSED_BEFORE_BROADCAST}%')))`;

/**
 * An administrator's block of the request's wallet, not lifted (SQL; `r` is the request): a blocked wallet cannot be
 * sponsored (interface-spec section 1), so a request approved before its wallet was blocked waits (approved, or
 * relayed with every attempt failed) until the block is lifted. An automatic block does not hold it: anyone can set
 * one off for any wallet (its requests, refused or not, count against the wallet limit) and renew it every 15
 * minutes, which would hold a paid-for approval for as long as they liked. Review rejects one still pending on
 * either kind (review-queue.ts), as decisions.md says.
 */
const WALLET_BLOCKED = `EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = r.wallet_address AND b.kind = 'admin' AND b.lifted_at IS NULL
          AND (b.expires_at IS NULL OR b.expires_at > statement_timestamp()))`;

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
      AND NOT ${WALLET_BLOCKED}
    ORDER BY r.status DESC, r.approved_at, r.id
    LIMIT $1::int
    FOR UPDATE OF r SKIP LOCKED`;

const READ_RELAY_CANDIDATES = `
    SELECT r.id, r.wallet_address, r.status,
      COALESCE((SELECT max(t.relay_attempt) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id), 0)::int AS attempts,
      (SELECT count(*) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND ${COUNTS_AS_BURNED})::int AS burned,
      EXISTS (SELECT 1 FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted')) AS open,
      ${WALLET_BLOCKED} AS blocked
    FROM sponsorship_requests r
    WHERE r.id = ANY($1::uuid[])
    ORDER BY r.approved_at, r.id`;

/** The first half of the claim: locks (SKIP LOCKED) the requests that look like they need an attempt. */
export function lockRelayCandidates(limit: number): Query<string[]> {
  return query(LOCK_RELAY_CANDIDATES, [limit], (rows) => rows.map((r) => r.id as string));
}

/**
 * The second half, a later statement of the same transaction: re-reads the locked requests (READ COMMITTED: a new
 * snapshot, taken after the locks were granted) and keeps those that still need an attempt.
 */
export function readRelayCandidates(lockedIds: readonly string[]): Query<RelayCandidate[]> {
  return query(READ_RELAY_CANDIDATES, [lockedIds], (rows) =>
    (rows as { id: string; wallet_address: string; status: RequestStatus; attempts: number; burned: number; open: boolean; blocked: boolean }[])
      .filter((r): r is typeof r & { status: "approved" | "relayed" } => !r.open && !r.blocked && (r.status === "approved" || r.status === "relayed"))
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
export function insertRelayAttempts(attempts: readonly NewRelayAttempt[]): Query<Map<string, string>> {
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

/** approved -> relayed for requests whose first attempt has just been stored. */
const MARK_RELAYED = `
    UPDATE sponsorship_requests SET status = 'relayed', relayed_at = now(), status_actor = $2, status_reason = $3
    WHERE id = ANY($1::uuid[]) AND status = 'approved'
    RETURNING id`;

export function markRequestsRelayed(ids: readonly string[], actor: string, reason: string): Query<number> {
  return query(MARK_RELAYED, [ids, actor, reason], (rows) => rows.length);
}

const PAUSE_STATE = `SELECT paused, pause_reason FROM service_state WHERE id = 1`;

export type PauseState = { paused: boolean; reason: string | null };

const toPauseState = (rows: Record<string, unknown>[]): PauseState => ({
  paused: rows[0]?.paused === true,
  reason: (rows[0]?.pause_reason as string | null | undefined) ?? null,
});

/** The administrator's pause (decisions.md, "Pause"): while set, the relay stage sends no new relay transaction. */
export function pauseState(): Query<PauseState> {
  return query(PAUSE_STATE, [], toPauseState);
}

/**
 * The relay's last look before it commits (relay.ts): the batch was decided on a pause and wallet blocks read
 * before the chain was asked, which can take seconds; an administrator who paused or blocked meanwhile was answered
 * before the relay's attempts were stored, and they must not be sent. Three statements, sent with the writes:
 * - the batch's wallets under their advisory keys (`wallet:<address>`, lib/sponsorship/lock-keys.ts), shared:
 *   blockWallet takes the same key exclusively, so a block in progress is waited for and one that starts now waits
 *   for this commit;
 * - the pause row FOR SHARE (the pause's upsert waits for this commit likewise; one in progress is waited for and
 *   its new value read);
 * - the requests of the batch whose wallet has an administrator's block, read after both locks are held.
 * A pause or a block that commits after them was answered after the attempts were stored: those attempts were
 * decided before it, as ones already sent (decisions.md "Pause": sent relays are still confirmed).
 */
const LOCK_BATCH_WALLETS = `SELECT count(pg_advisory_xact_lock_shared(hashtextextended('wallet:' || a, 0)))::int AS n FROM unnest($1::text[]) AS a`;
const LOCK_PAUSE_STATE = `${PAUSE_STATE} FOR SHARE`;
const BLOCKED_REQUESTS = `SELECT r.id FROM sponsorship_requests r WHERE r.id = ANY($1::uuid[]) AND ${WALLET_BLOCKED}`;

type BatchEntry = { requestId: string; walletAddress: string };

export function relayRulesAtCommit(batch: readonly BatchEntry[]): [Query<number>, Query<PauseState>, Query<string[]>] {
  const [lockWallets, blocked] = walletBlocksAtCommit(batch);
  return [lockWallets, query(LOCK_PAUSE_STATE, [], toPauseState), blocked];
}

/**
 * The wallet half of relayRulesAtCommit, alone (the confirm stage's replacement of a stuck attempt: the pause does
 * not stop it, decisions.md): the wallets' advisory keys, shared, then the requests whose wallet has an
 * administrator's block. Send them together, before the writes they guard.
 */
export function walletBlocksAtCommit(batch: readonly BatchEntry[]): [Query<number>, Query<string[]>] {
  // Sorted and distinct, like lockKeys (db/sql/advisory-locks.ts).
  const wallets = [...new Set(batch.map((b) => b.walletAddress))].sort();
  return [
    query(LOCK_BATCH_WALLETS, [wallets], (rows) => (rows[0]?.n as number | undefined) ?? 0),
    query(BLOCKED_REQUESTS, [batch.map((b) => b.requestId)], (rows) => rows.map((r) => r.id as string)),
  ];
}

const COUNT_OPEN_RELAYS = `SELECT count(DISTINCT sponsorship_request_id)::int AS n FROM relay_transactions WHERE status IN ('queued', 'submitted')`;

export function countOpenRelays(): Query<number> {
  return query(COUNT_OPEN_RELAYS, [], (rows) => (rows[0]?.n as number | undefined) ?? 0);
}

const FAIL_REQUEST = `
    UPDATE sponsorship_requests r SET status = 'failed', failed_at = now(), failure_reason = $3, status_actor = $2, status_reason = $3
    WHERE r.id = $1::uuid AND r.status = 'relayed'
    RETURNING ${TIMES}`;

/** relayed -> failed, with the reason shown to clients; answers the request, or undefined when not relayed. */
export function failRequest(id: string, actor: string, reason: string): Query<RequestTimes | undefined> {
  return query(FAIL_REQUEST, [id, actor, reason], (rows) => (rows[0] ? toTimes(rows[0]) : undefined));
}
