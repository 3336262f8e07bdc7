import type { RelayStatus, RequestStatus } from "@/db/schema";
import { query, type Query } from "@/db/sql/run";
import { none, TIMES, toTimes, type RequestTimes } from "./request-times";
import { COUNTS_AS_BURNED } from "./relay-queue";

/**
 * How relay attempts end (broadcast, confirm): submitted, confirmed, failed; their requests completed; the locks
 * the confirm stage takes before it decides. Guarded by `WHERE status IN (<from>)` like every status change.
 */

const LOCK_REQUEST = `SELECT status FROM sponsorship_requests WHERE id = $1::uuid FOR UPDATE`;
const REQUEST_ATTEMPTS = `
    SELECT count(*) FILTER (WHERE ${COUNTS_AS_BURNED})::int AS burned,
           COALESCE(max(relay_attempt), 0)::int AS latest
    FROM relay_transactions WHERE sponsorship_request_id = $1::uuid`;

/**
 * A request's attempts: `burned`, those that count against MAX_RELAY_ATTEMPTS (COUNTS_AS_BURNED: not a revert of
 * the service's own making, nor one no node ever took), and `latest`, the highest attempt number it used (the next
 * is latest + 1). The two differ once such an attempt was numbered.
 */
export type RequestAttempts = { burned: number; latest: number };

/**
 * Locks a request (every transaction that adds an attempt or a fill for a request holds it), then reads its
 * attempts (RequestAttempts: the burned count and the latest number): two statements, in this order, the second a
 * later statement that sees everything committed before the lock was granted. Send them together.
 */
export function lockRequest(id: string): [Query<RequestStatus | undefined>, Query<RequestAttempts>] {
  return [
    query(LOCK_REQUEST, [id], (rows) => rows[0]?.status as RequestStatus | undefined),
    query(REQUEST_ATTEMPTS, [id], (rows) => ({
      burned: (rows[0]?.burned as number | undefined) ?? 0,
      latest: (rows[0]?.latest as number | undefined) ?? 0,
    })),
  ];
}

const LOCK_OPEN_RELAY = `SELECT 1 FROM relay_transactions WHERE id = $1::uuid AND status IN ('queued', 'submitted') FOR UPDATE`;
const LOCK_OPEN_FILL = `SELECT 1 FROM relayer_nonce_fills WHERE id = $1::uuid AND status IN ('queued', 'submitted') FOR UPDATE`;

/** Whether a stored transaction (relay attempt or fill) is still queued or submitted; locks its row. */
export function lockIfOpen(kind: "relay" | "fill", id: string): Query<boolean> {
  return query(kind === "relay" ? LOCK_OPEN_RELAY : LOCK_OPEN_FILL, [id], (rows) => rows.length > 0);
}

const COUNT_OPEN_ATTEMPTS = `
    SELECT count(*)::int AS n FROM relay_transactions WHERE sponsorship_request_id = $1::uuid AND status IN ('queued', 'submitted')`;

/** Attempts of a request still queued or submitted: each of them could still be mined and pay the wallet. */
export function countOpenAttempts(id: string): Query<number> {
  return query(COUNT_OPEN_ATTEMPTS, [id], (rows) => (rows[0]?.n as number | undefined) ?? 0);
}

const RELAYS_SUBMITTED = `
    UPDATE relay_transactions SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash = ANY($1::text[]) AND status = 'queued'`;

/** queued -> submitted (first broadcast accepted) for relay attempts, by hash. */
export function markRelaysSubmitted(hashes: readonly string[]): Query<undefined> {
  return query(RELAYS_SUBMITTED, [hashes], none);
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
 * Two statements to send together: the first records the broadcast of attempts still queued (the trigger allows
 * queued -> submitted -> confirmed, not queued -> confirmed); the second answers the requests of the attempts it
 * confirmed.
 */
export function confirmRelays(mined: readonly MinedRelay[]): [Query<undefined>, Query<string[]>] {
  return [
    query(RELAYS_SUBMITTED_BY_ID, [mined.map((m) => m.id)], none),
    query(CONFIRM_RELAYS, [mined.map((m) => m.id), mined.map((m) => m.blockNumber.toString()), mined.map((m) => m.gasUsed.toString())], (rows) =>
      rows.map((r) => r.sponsorship_request_id as string),
    ),
  ];
}

/**
 * Mined attempts that a pass is about to fail (a revert) recorded as broadcast first, as confirmRelays does for a
 * success: a node took them. Left queued (the node's answer to the broadcast timed out or was lost, the worker died
 * before writing it), a reverted attempt counted as never taken by a node (COUNTS_AS_BURNED) and burned nothing, so
 * a request whose attempts all reverted so was tried without end.
 */
export function markRelaysMined(ids: readonly string[]): Query<undefined> {
  return query(RELAYS_SUBMITTED_BY_ID, [ids], none);
}

export type RelayFailure = { id: string; reason: string };

/** queued/submitted -> failed with a readable reason. */
const failRelaysIn = (statuses: string) => `
    UPDATE relay_transactions t SET status = 'failed', failed_at = now(), failure_reason = v.reason
    FROM unnest($1::uuid[], $2::text[]) AS v(id, reason)
    WHERE t.id = v.id AND t.status IN (${statuses})
    RETURNING t.id`;
const FAIL_RELAYS = failRelaysIn("'queued', 'submitted'");

export function failRelays(failures: readonly RelayFailure[]): Query<number> {
  return query(FAIL_RELAYS, [failures.map((f) => f.id), failures.map((f) => f.reason)], (rows) => rows.length);
}

const FAIL_UNSENT_RELAYS = failRelaysIn("'queued'");

/**
 * A node's refusal fails only attempts no node ever accepted (still queued): one accepted before and refused when
 * sent again may still be mined elsewhere, so it stays open (the stuck timer replaces it). Returns the ids failed.
 */
export function failUnsentRelays(failures: readonly RelayFailure[]): Query<Set<string>> {
  return query(FAIL_UNSENT_RELAYS, [failures.map((f) => f.id), failures.map((f) => f.reason)], (rows) => new Set(rows.map((r) => r.id as string)));
}

/**
 * Requests whose last attempt a node has just refused (failUnsentRelays, in the same transaction): relayed -> failed
 * when nothing of theirs is open any more and their burned attempts (COUNTS_AS_BURNED) reached `max`. Before, the
 * relay stage failed them on its next pass, and none came while anything held it back (a pause, a paused or short
 * treasury, fees above the ceiling): the request stayed relayed, the wallet unable to ask again. `reason` per
 * request is the refusal. Returns the requests failed.
 */
const FAIL_USED_UP = `
    UPDATE sponsorship_requests r
    SET status = 'failed', failed_at = now(), status_actor = $3,
        failure_reason = 'relay failed after ' || b.burned || ' attempts; last: ' || b.reason,
        status_reason = 'relay failed after ' || b.burned || ' attempts; last: ' || b.reason
    FROM (
      SELECT v.id, v.reason,
        (SELECT count(*) FROM relay_transactions t WHERE t.sponsorship_request_id = v.id AND ${COUNTS_AS_BURNED})::int AS burned
      FROM unnest($1::uuid[], $2::text[]) AS v(id, reason)
    ) b
    WHERE r.id = b.id AND r.status = 'relayed' AND b.burned >= $4::int
      AND NOT EXISTS (SELECT 1 FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND t.status IN ('queued', 'submitted'))
    RETURNING ${TIMES}`;

export function failUsedUpRequests(refused: readonly { requestId: string; reason: string }[], actor: string, max: number): Query<RequestTimes[]> {
  return query(FAIL_USED_UP, [refused.map((r) => r.requestId), refused.map((r) => r.reason), actor, max], (rows) => rows.map(toTimes));
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

export function completeRequests(ids: readonly string[], actor: string, reason: string): Query<RequestTimes[]> {
  return query(COMPLETE_REQUESTS, [ids, actor, reason], (rows) => rows.map(toTimes));
}

/**
 * relayed -> completed for the requests of the given attempts that are confirmed: sent behind
 * `confirmRelays` in the same transaction, it completes exactly the requests whose attempt that
 * statement confirmed (or had confirmed before), without waiting for its answer.
 */
export function completeRequestsOfConfirmed(relayIds: readonly string[], actor: string, reason: string): Query<RequestTimes[]> {
  return query(COMPLETE_REQUESTS_OF_CONFIRMED, [relayIds, actor, reason], (rows) => rows.map(toTimes));
}

const RELAY_BY_HASH = `SELECT id, sponsorship_request_id, status FROM relay_transactions WHERE transaction_hash = $1`;

/** The relay attempt that sent `hash` (any status), with its request. */
export function findRelayByHash(hash: string): Query<{ id: string; sponsorshipRequestId: string; status: RelayStatus } | undefined> {
  return query(RELAY_BY_HASH, [hash.toLowerCase()], ([row]) =>
    row ? { id: row.id as string, sponsorshipRequestId: row.sponsorship_request_id as string, status: row.status as RelayStatus } : undefined,
  );
}
