import type { Address, Hex } from "viem";
import type { RelayStatus, RequestStatus } from "@/db/schema";
import { query, type Query } from "@/db/sql/run";

/** What the confirm stage reads: the open nonce groups of its relayers, and the stored bytes it broadcasts again. */

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
export function listOpenNonceGroups(relayers: readonly string[], limit = 5_000): Query<OpenNonceTransaction[]> {
  return query(OPEN_NONCE_GROUPS, [relayers, limit], (result) => {
    const rows = result as {
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
  });
}

const RAW_TRANSACTIONS = `
    SELECT transaction_hash, raw_transaction FROM relay_transactions WHERE transaction_hash = ANY($1::text[]) AND raw_transaction IS NOT NULL
    UNION ALL
    SELECT transaction_hash, raw_transaction FROM relayer_nonce_fills WHERE transaction_hash = ANY($1::text[])`;

/** The stored raw bytes of transactions, by hash (relays and fills). */
export function readRawTransactions(hashes: readonly string[]): Query<Map<Hex, Hex>> {
  return query(RAW_TRANSACTIONS, [hashes], (rows) => new Map(rows.map((r) => [r.transaction_hash as Hex, r.raw_transaction as Hex])));
}
