import { BaseError, HttpRequestError, RpcRequestError } from "viem";
import { endpointNotReached, rpcErrorMessage, type EndpointState } from "@/lib/chain/endpoint-breaker";

/**
 * How the worker reads the chain's answers: a node that was not reached (ChainUnavailableError, counted by
 * ChainHealth so the relay timeout ignores outages) apart from a node that said no, and what a broadcast's answer
 * means for the stored transaction (BroadcastOutcome), and the shapes of the answers the stages work with (fees,
 * nonces, receipts, endpoints). worker/chain.ts asks; this file judges.
 */

/** The node could not be reached or did not answer in time: nothing is known, retry later. */
export class ChainUnavailableError extends Error {
  override name = "ChainUnavailableError";
}

/**
 * Every endpoint that has the blocks refused an `eth_getLogs` (not unreachable: it answered with an error): a
 * provider that limits log queries (`rangeLimit`: the range or the result too large, narrowed by WorkerChain down to
 * MIN_LOG_QUERY_BLOCKS), does not serve them, or refused this once (a rate limit). Not an outage; the confirm stage
 * waits out its patience and then decides without the events (worker/stages/confirm/settle.ts).
 */
export class LogsRefusedError extends Error {
  override name = "LogsRefusedError";
  readonly rangeLimit: boolean;

  constructor(message: string, options: { cause: unknown; rangeLimit: boolean }) {
    super(message, { cause: options.cause });
    this.rangeLimit = options.rangeLimit;
  }
}

export type BroadcastOutcome =
  /** The node holds it (new, or "already known"). */
  | { kind: "accepted" }
  /** "nonce too low": this or another transaction at the nonce was mined; receipts tell which. */
  | { kind: "nonce_used"; message: string }
  /**
   * Not reachable, timed out, or a temporary refusal (relayer out of gas money): try again later. `nodeFailure`: the
   * node answered that it failed (-32603, "internal error", "upstream"...), which ./stages/broadcast.ts waits out for
   * RELAY_TIMEOUT_MS at most before it takes it as a refusal.
   */
  | { kind: "unavailable"; message: string; nodeFailure?: true }
  /** Refused for good (invalid, underpriced replacement...). */
  | { kind: "rejected"; message: string };

export const messageOf = rpcErrorMessage;

/** True when the error means "the node was not reached / did not answer", not "the node said no". */
export function isUnreachable(error: unknown): boolean {
  return error instanceof ChainUnavailableError || endpointNotReached(error);
}

/** Wraps a read: unreachable -> ChainUnavailableError, anything else (a real answer) is rethrown. */
export async function reach<T>(what: string, read: () => Promise<T>, health?: ChainHealth): Promise<T> {
  try {
    const value = await read();
    health?.noteReached();
    return value;
  } catch (error) {
    if (isUnreachable(error)) {
      const wrapped = new ChainUnavailableError(`${what}: ${messageOf(error)}`, { cause: error });
      health?.noteUnreachable(wrapped);
      throw wrapped;
    }
    health?.noteReached();
    throw error;
  }
}

/** Ended outages kept for reachableWithinMs: far more than one relay timeout holds at any failure rate that matters. */
const OUTAGES_KEPT = 1_000;

/**
 * Whether the node answers, and since when. The time it was not reachable is not counted against the relay timeout
 * (reachableWithinMs): a transaction cannot be declared stuck because of time during which the chain could not be
 * asked, nor before this worker started.
 */
export class ChainHealth {
  reachable = true;
  downSince: Date | undefined;
  recoveredAt = new Date();
  // performance.now() of the same moments, for the durations (a step of the wall clock moves none of them).
  private downSinceMs = 0;
  private readonly startedAtMs = performance.now();
  /** Ended outages, oldest first: [from, to] on performance.now(). */
  private readonly outages: [number, number][] = [];
  lastError: string | undefined;
  /** performance.now() of the last call that came back, reached or not (the worker's stage deadline counts from it). */
  lastAnswerAt = 0;
  constructor(private readonly onChange?: (reachable: boolean, detail: { downForMs?: number; error?: string }) => void) {}

  noteReached(): void {
    this.lastAnswerAt = performance.now();
    if (this.reachable) return;
    const downForMs = this.downSince ? Math.round(performance.now() - this.downSinceMs) : undefined;
    this.reachable = true;
    this.downSince = undefined;
    this.recoveredAt = new Date();
    this.outages.push([this.downSinceMs, performance.now()]);
    if (this.outages.length > OUTAGES_KEPT) this.outages.shift();
    this.onChange?.(true, { downForMs });
  }

  noteUnreachable(error: Error): void {
    this.lastAnswerAt = performance.now();
    this.lastError = error.message;
    if (!this.reachable) return;
    this.reachable = false;
    this.downSince = new Date();
    this.downSinceMs = performance.now();
    this.onChange?.(false, { error: error.message });
  }

  /**
   * Of the last `windowMs` (and no further back than this worker's start), the milliseconds the chain was reachable:
   * the window less the outages in it. Before, the count restarted at the end of every outage, however short, so one
   * rate-limited answer (HTTP 429) or one timeout a minute kept a stuck transaction from ever being replaced.
   */
  reachableWithinMs(windowMs: number): number {
    const now = performance.now();
    const start = Math.max(now - windowMs, this.startedAtMs);
    let down = this.reachable ? 0 : now - Math.max(this.downSinceMs, start);
    for (let i = this.outages.length - 1; i >= 0; i--) {
      const [from, to] = this.outages[i]!;
      if (to <= start) break;
      down += to - Math.max(from, start);
    }
    return Math.max(0, now - start - down);
  }
}

/** EIP-1474: parse error, invalid request, method not found, resource unavailable, method not supported, limit
 * exceeded, JSON-RPC version not supported. */
const REQUEST_LEVEL_RPC_CODES = new Set([-32700, -32600, -32601, -32002, -32004, -32005, -32006]);

/**
 * How nodes word "the sender cannot pay for this transaction" (geth, reth, erigon, anvil; Nethermind), including
 * geth's "transaction would cause overdraft" (the sender's pending transactions together exceed its balance).
 */
export const INSUFFICIENT_FUNDS = /insufficient[ _]?funds|overdraft/i;

/** How nodes word "the transaction's max fee is below the current base fee" (anvil, geth, reth, erigon, Nethermind). */
export const BELOW_BASE_FEE = /(max fee per gas|fee ?cap|maxfeepergas)[^,;]* (less|lower) than (the )?(block )?base ?fee|feecap too low|FeeTooLow/i;

export function classifyBroadcastError(error: unknown): BroadcastOutcome {
  const message = messageOf(error);
  if (isUnreachable(error)) return { kind: "unavailable", message };
  // An HTTP failure without a JSON-RPC answer (401/403 from a gateway, 404, 413...): the node never judged the
  // transaction, nothing was broadcast, so no attempt may be consumed.
  if (error instanceof BaseError && error.walk((e) => e instanceof HttpRequestError) instanceof HttpRequestError) {
    return { kind: "unavailable", message };
  }
  // A JSON-RPC error about the request rather than the transaction (a batch refused as a whole, a method not
  // offered, a request limit): no verdict on the transaction either. Nodes judge transactions with other codes
  // (anvil -32003, geth -32000).
  const rpc = error instanceof BaseError ? error.walk((e) => e instanceof RpcRequestError) : undefined;
  if (rpc instanceof RpcRequestError && REQUEST_LEVEL_RPC_CODES.has(rpc.code)) return { kind: "unavailable", message };
  // Nethermind words these AlreadyKnown and OldNonce.
  if (/already ?known|already imported|known transaction|already in (the )?(mem)?pool/i.test(message)) return { kind: "accepted" };
  if (/nonce too low|nonce has already been used|already mined|old ?nonce/i.test(message)) return { kind: "nonce_used", message };
  // A nonce above the one this node expects (geth "nonce too high", Nethermind NonceGap): the node lacks an earlier
  // transaction of the relayer, which is sent again first; no verdict on this one.
  if (/nonce too high|nonce ?gap/i.test(message)) return { kind: "unavailable", message };
  // The base fee rose above the transaction's max fee (anvil refuses, and evicts, such a transaction; a fee spike
  // under MAX_FEE_PER_GAS_GWEI does this): it can be mined once the base fee falls, so it waits, no attempt burned
  // (after RELAY_TIMEOUT_MS the confirm stage replaces it at the market's fees, as any stuck transaction).
  if (BELOW_BASE_FEE.test(message)) return { kind: "unavailable", message };
  if (INSUFFICIENT_FUNDS.test(message) || /rate limit|too many requests|temporarily|try again|busy|txpool is full|pool is full/i.test(message)) {
    return { kind: "unavailable", message };
  }
  // The node (or a hosted provider's gateway in front of it) failed, rather than judged the transaction: JSON-RPC's
  // internal error, a timeout on its side, a node that is still syncing. It may even have passed the transaction on
  // (hosted providers do): left queued, it is sent again, and the answer then ("already known", "nonce too low") or
  // its receipt settles it. Read as a refusal, it burned an attempt and closed the record of a payment that was made.
  if (rpc instanceof RpcRequestError && rpc.code === -32603) return { kind: "unavailable", message, nodeFailure: true };
  if (TRANSIENT_NODE_FAILURE.test(message)) return { kind: "unavailable", message, nodeFailure: true };
  return { kind: "rejected", message };
}

/** How nodes and gateways word a failure of their own, not a verdict on the transaction. */
const TRANSIENT_NODE_FAILURE =
  /internal (json-rpc |server )?error|timed? ?out|timeout|deadline exceeded|upstream|header not found|unexpected eof|bad gateway|service unavailable|syncing/i;

/**
 * Combines the answers of several endpoints to one broadcast: any acceptance wins, then a used nonce, then a refusal.
 * A refusal outweighs an endpoint that did not answer (down, or timed out): an attempt no node would take must not
 * wait for as long as one endpoint is down (a queued attempt is replaced only once the base fee is above its max
 * fee). An endpoint that timed out after taking it is the one case this misjudges (docs/worker.md, "Errors before
 * broadcast").
 */
export function combineBroadcastOutcomes(outcomes: readonly BroadcastOutcome[]): BroadcastOutcome {
  for (const kind of ["accepted", "nonce_used", "rejected"] as const) {
    const found = outcomes.find((o) => o.kind === kind);
    if (found) return found;
  }
  return outcomes[0]!;
}

export type Fees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
/** The fees the market suggests, with the latest block's base fee they were derived from. */
export type MarketFees = Fees & { baseFeePerGas: bigint };

export type RelayerNonces = {
  /** Nonce of the next transaction to be mined: every lower nonce is consumed. */
  latest: number;
  /** `latest` plus the transactions the node holds without a gap. */
  pending: number;
  /** Nonce at the block CONFIRMATIONS - 1 below the head (`latest` when CONFIRMATIONS is 1): lower nonces settle. */
  settled: number;
};

export type MinedReceipt = { status: "success" | "reverted"; blockNumber: bigint; gasUsed: bigint };

/** One RPC endpoint as the worker last found it (shown in its heartbeat: `chain.endpoints`). */
export type { EndpointState };
