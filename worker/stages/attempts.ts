import type { Address } from "viem";
import type { NewNonceFill } from "@/db/queries/nonce-fills";
import type { NewRelayAttempt } from "@/db/queries/relay-queue";
import type { Fees } from "../chain-answers";
import type { WorkerContext } from "../context";
import type { StoredTransaction } from "./broadcast";
import { FILL_GAS_LIMIT, SPONSOR_GAS_LIMIT, signFillTransaction, signSponsorTransaction } from "./transactions";

/**
 * The one place an attempt (or a nonce fill) is signed and shaped for storage: the relay stage's first attempts and
 * the confirm stage's replacements and cancels call it alike. The caller stores the result (status queued, in the
 * transaction that holds the relayer's lease and the request's lock) and only then broadcasts it (./broadcast.ts).
 */

/** Signs the `sponsor` call of a request's attempt at (relayer, nonce) with `fees`: a row ready to store. */
export async function signAttempt(
  ctx: WorkerContext,
  a: { requestId: string; attempt: number; wallet: Address; relayer: Address; nonce: number; fees: Fees },
): Promise<NewRelayAttempt> {
  const signed = await signSponsorTransaction(ctx.pool.account(a.relayer), {
    chainId: ctx.chain.chainId,
    treasury: ctx.chain.treasuryAddress,
    nonce: a.nonce,
    fees: a.fees,
    wallet: a.wallet,
    requestId: a.requestId,
  });
  return {
    sponsorshipRequestId: a.requestId,
    relayAttempt: a.attempt,
    relayerAddress: a.relayer,
    nonce: a.nonce,
    transactionHash: signed.hash,
    rawTransaction: signed.raw,
    maxFeePerGas: a.fees.maxFeePerGas,
    maxPriorityFeePerGas: a.fees.maxPriorityFeePerGas,
    gasLimit: SPONSOR_GAS_LIMIT,
  };
}

/**
 * Signs a zero-value transfer to the relayer itself at `nonce` (consumes the nonce): a fill row ready to store.
 * `earlier`: fills already stored at this nonce. Signing is deterministic (RFC 6979): a fill at the same fees as one
 * before it (read again in the same block, or pinned at MAX_FEE_PER_GAS_GWEI) would be that very transaction, whose
 * unique hash failed the insert, and with it the confirm stage at every pass while the hole stayed. Each later fill
 * offers one more unit of gas than it uses, so it is a transaction of its own at the same cost.
 */
export async function signFill(
  ctx: WorkerContext,
  f: { relayer: Address; nonce: number; fees: Fees; requestId: string | null; reason: string; earlier?: number },
): Promise<NewNonceFill> {
  const signed = await signFillTransaction(ctx.pool.account(f.relayer), {
    chainId: ctx.chain.chainId,
    nonce: f.nonce,
    fees: f.fees,
    gas: FILL_GAS_LIMIT + BigInt(f.earlier ?? 0),
  });
  return {
    relayerAddress: f.relayer,
    nonce: f.nonce,
    sponsorshipRequestId: f.requestId,
    reason: f.reason,
    transactionHash: signed.hash,
    rawTransaction: signed.raw,
    maxFeePerGas: f.fees.maxFeePerGas,
    maxPriorityFeePerGas: f.fees.maxPriorityFeePerGas,
  };
}

/** A stored attempt as the broadcast takes it (`id`: its row). */
export function storedAttempt(a: NewRelayAttempt, id: string): StoredTransaction {
  return {
    kind: "relay",
    id,
    hash: a.transactionHash,
    raw: a.rawTransaction,
    requestId: a.sponsorshipRequestId,
    relayer: a.relayerAddress,
    nonce: a.nonce,
    attempt: a.relayAttempt,
  };
}

/** A stored fill as the broadcast takes it (`id`: its row). */
export function storedFill(f: NewNonceFill, id: string): StoredTransaction {
  return { kind: "fill", id, hash: f.transactionHash, raw: f.rawTransaction, requestId: f.sponsorshipRequestId, relayer: f.relayerAddress, nonce: f.nonce };
}
