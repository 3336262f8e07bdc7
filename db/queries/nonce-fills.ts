import type { Address, Hex } from "viem";
import { query, type Query } from "@/db/sql/run";
import { none } from "./request-times";
import type { RelayFailure } from "./relay-outcomes";

/** Nonce fills: zero-value transfers that consume a nonce nothing else holds (worker/stages/confirm/holes.ts). */

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

const INSERT_NONCE_FILL = `
    INSERT INTO relayer_nonce_fills
      (relayer_address, nonce, sponsorship_request_id, reason, transaction_hash, raw_transaction, max_fee_per_gas, max_priority_fee_per_gas)
    VALUES ($1, $2::bigint, $3::uuid, $4, $5, $6, $7::numeric, $8::numeric)
    RETURNING id`;

const COUNT_NONCE_FILLS = `
    SELECT count(*)::int AS n FROM relayer_nonce_fills WHERE relayer_address = $1 AND nonce = $2::bigint`;

/** How many fills are stored at (relayer, nonce), whatever their status (signFill makes each new one distinct). */
export function countNonceFills(relayer: Address, nonce: number): Query<number> {
  return query(COUNT_NONCE_FILLS, [relayer, String(nonce)], (rows) => Number(rows[0]!.n));
}

/** Stores a signed fill (status queued) before it is broadcast; answers its id. */
export function insertNonceFill(fill: NewNonceFill): Query<string> {
  return query(
    INSERT_NONCE_FILL,
    [
      fill.relayerAddress,
      String(fill.nonce),
      fill.sponsorshipRequestId,
      fill.reason,
      fill.transactionHash,
      fill.rawTransaction,
      fill.maxFeePerGas.toString(),
      fill.maxPriorityFeePerGas.toString(),
    ],
    (rows) => rows[0]!.id as string,
  );
}

const FILL_SUBMITTED_BY_ID = `
    UPDATE relayer_nonce_fills SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE id = $1::uuid AND status = 'queued'`;
const CONFIRM_FILL = `
    UPDATE relayer_nonce_fills SET status = 'confirmed', resolved_at = now(), block_number = $2::bigint
    WHERE id = $1::uuid AND status IN ('submitted', 'failed')`;

/** A mined fill becomes confirmed (through submitted, as the trigger requires): two statements to send together. */
export function confirmNonceFill(id: string, blockNumber: bigint): [Query<undefined>, Query<undefined>] {
  return [query(FILL_SUBMITTED_BY_ID, [id], none), query(CONFIRM_FILL, [id, blockNumber.toString()], none)];
}

// A fill's `reason` says why it was sent; why it failed is appended.
const failFillsIn = (statuses: string) => `
    UPDATE relayer_nonce_fills f SET status = 'failed', resolved_at = now(), reason = f.reason || ' | failed: ' || v.reason
    FROM unnest($1::uuid[], $2::text[]) AS v(id, reason)
    WHERE f.id = v.id AND f.status IN (${statuses})
    RETURNING f.id`;
const FAIL_NONCE_FILLS = failFillsIn("'queued', 'submitted'");

export function failNonceFills(failures: readonly RelayFailure[]): Query<undefined> {
  return query(FAIL_NONCE_FILLS, [failures.map((f) => f.id), failures.map((f) => f.reason)], none);
}

const FAIL_UNSENT_NONCE_FILLS = failFillsIn("'queued'");

/** As failUnsentRelays (./relay-outcomes.ts): a refusal fails only a fill no node ever accepted. Returns the ids failed. */
export function failUnsentNonceFills(failures: readonly RelayFailure[]): Query<Set<string>> {
  return query(FAIL_UNSENT_NONCE_FILLS, [failures.map((f) => f.id), failures.map((f) => f.reason)], (rows) => new Set(rows.map((r) => r.id as string)));
}

const FILLS_SUBMITTED = `
    UPDATE relayer_nonce_fills SET status = 'submitted', submitted_at = COALESCE(submitted_at, now())
    WHERE transaction_hash = ANY($1::text[]) AND status = 'queued'`;

/** queued -> submitted (first broadcast accepted) for relay attempts, by hash. */

export function markFillsSubmitted(hashes: readonly string[]): Query<undefined> {
  return query(FILLS_SUBMITTED, [hashes], none);
}
