import type { Address } from "viem";
import type { Database } from "@/db/client";
import type { TreasuryState } from "@/lib/chain/treasury";
import type { Logger } from "@/lib/log";
import type { WorkerChain } from "./chain";
import { capFees, type FeeCeilingWatch, type OfferedFees } from "./fee-ceiling";
import type { RelayerPool } from "./relayers";

/** What every stage of one worker process shares. */

export type WorkerSettings = {
  batchSize: number;
  maxRelayAttempts: number;
  relayTimeoutMs: number;
  /** CONFIRMATIONS: a transaction settles once this many blocks hold it (its own included). */
  confirmations: number;
  intervalMs: number;
  /** WORKER_BATCH_WINDOW_MS: the least time between two queue passes, unless the last batch was full. */
  batchWindowMs: number;
  heartbeatMs: number;
  /** How often a beat also prunes the rows of workers gone for HEARTBEAT_RETENTION_MS (worker/heartbeat.ts). */
  heartbeatPruneMs: number;
  leaseTtlMs: number;
  /** How often in-flight transactions are checked (a new block triggers the full check). */
  confirmPollMs: number;
  /** A stage this long without an answer is stuck: the loop ends with StageDeadlineError (worker/loop.ts). */
  stageDeadlineMs: number;
  /**
   * The worker's pool gives up a connection on which a statement has heard nothing from the server for this long (a
   * partition, a frozen server: no reset comes). The stage fails as in an outage and is retried on a new connection,
   * so the worker goes on by itself once the network is back, long before the stage deadline would end it.
   */
  databaseAnswerTimeoutMs: number;
  /**
   * How long a revert whose replay the node does not answer waits for one before it is settled as "reason not
   * available" (which burns an attempt): an outage of a minute is waited out; a node that never answers it (an
   * endpoint that refuses calls at past blocks) cannot hold the request for ever. 60 s; shorter in tests.
   */
  replayPatienceMs: number;
  /**
   * Iterations in a row that fail with an error that is not an outage before the loop ends with WorkerStuckError and
   * the process exits 1 (worker/loop.ts). 30; fewer in tests.
   */
  failuresBeforeExit: number;
  /** The longest wait between two iterations after failures (exponential from 250 ms). 10 s; shorter in tests. */
  maxBackoffMs: number;
  /** Test hook: SIGKILL right after this many accepted broadcasts. */
  crashAfterBroadcasts: number | undefined;
};

export type WorkerTotals = {
  reviewed: number;
  approved: number;
  rejected: number;
  attempts: number;
  broadcasts: number;
  rebroadcasts: number;
  replacements: number;
  fills: number;
  completed: number;
  failedAttempts: number;
  failed: number;
};

/**
 * The treasury as a stage or the alert evaluation last read it; `checkedAtMs` is the same moment as `checkedAt` on
 * performance.now() (how old the read is, whatever the wall clock does).
 */
export type TreasuryStatus = TreasuryState & { checkedAt: Date; checkedAtMs: number; underfunded: boolean };

/** A treasury state just read, as the worker keeps it: underfunded when it cannot pay one sponsorship. */
export function treasuryStatus(state: TreasuryState): TreasuryStatus {
  return { ...state, checkedAt: new Date(), checkedAtMs: performance.now(), underfunded: state.balance < state.amount };
}

/**
 * One observation of a relayer's gas money: a broadcast refused for want of it (without gas), one the node accepted or
 * a balance read that covers the transaction refused before (with gas).
 */
export type RelayerGas = {
  withoutGas: boolean;
  /** performance.now() of the observation: its age is reported with it. */
  seenAtMs: number;
  /** The refused transaction's maximum cost (gas limit x max fee + value): a balance read must find that much. */
  neededWei?: bigint;
};

export type WorkerStatus = {
  treasury: TreasuryStatus | undefined;
  /** Why the relay stage's last pass sent nothing although requests were waiting (undefined: it was not held back). */
  relayWaiting: string | undefined;
  /** The administrator's pause as the relay stage last read it (undefined: not paused). */
  pause: { reason: string | null } | undefined;
  lastError: { stage: string; message: string; at: Date } | undefined;
  blockNumber: bigint | undefined;
  /** The head block of the last finished confirm pass: everything mined at or below it has been looked at. */
  checkedBlock: bigint | undefined;
  /** When the last confirm pass finished (ms since the epoch). */
  checkedAt: number | undefined;
  /** Relay transactions of this worker's relayers still open (queued or submitted). */
  inFlight: number;
  /**
   * What this worker last observed of each relayer's gas money while it held the relayer's lease (the heartbeat's
   * `withoutGas` and the `relayer.out_of_gas` alert report nothing else): forgotten when a lease is taken or ends, so
   * a worker that takes a relayer over knows nothing of it until it looks, and one that lost it keeps no stale view.
   */
  relayerGas: Map<string, RelayerGas>;
  totals: WorkerTotals;
};

export type WorkerContext = {
  workerId: string;
  /** `worker:<id>`: the status_actor of every change this worker makes. */
  actor: string;
  settings: WorkerSettings;
  db: Database;
  chain: WorkerChain;
  pool: RelayerPool;
  log: Logger;
  status: WorkerStatus;
  /** Market fees capped at the ceiling, refreshed with each new block. */
  fees: { value: OfferedFees; blockNumber: bigint } | undefined;
  /** The relay stage's chain reads at the head it last asked for (relayChainState). */
  relayReads?: { block: bigint; relayers: string; value: RelayChainState };
  /** MAX_FEE_PER_GAS_GWEI set: whether the network asks more than it (worker/fee-ceiling.ts). */
  feeCeiling: FeeCeilingWatch | undefined;
  /** Wakes the loop (a stage produced work for another). */
  wake: () => void;
};

export function emptyTotals(): WorkerTotals {
  return {
    reviewed: 0,
    approved: 0,
    rejected: 0,
    attempts: 0,
    broadcasts: 0,
    rebroadcasts: 0,
    replacements: 0,
    fills: 0,
    completed: 0,
    failedAttempts: 0,
    failed: 0,
  };
}

/**
 * Market fees capped at the fee ceiling (worker/fee-ceiling.ts), read at most once per block. While `aboveCeiling`
 * is true, callers sign nothing.
 */
export async function currentFees(ctx: WorkerContext): Promise<OfferedFees> {
  const block = ctx.status.blockNumber;
  if (ctx.fees && block !== undefined && ctx.fees.blockNumber === block) return ctx.fees.value;
  const value = capFees(await ctx.chain.marketFees(), ctx.feeCeiling?.state.ceilingWei);
  ctx.fees = { value, blockNumber: block ?? 0n };
  ctx.feeCeiling?.note(value);
  return value;
}

export type RelayChainState = { treasury: TreasuryState; fees: OfferedFees; authorised: Set<Address> };

/**
 * What the relay stage asks the chain before it signs (the treasury's state, the fees, which relayers the treasury
 * authorises), read once per block. The head is asked every time (one call); while it has not moved, the answers
 * read at it are used again: the chain's state at one block is the same however often it is read, so nothing is
 * seen later than before, and a burst of relay rounds within a block costs one call each instead of about nine
 * (hosted providers bill per call: docs/performance.md, "JSON-RPC calls").
 */
export async function relayChainState(ctx: WorkerContext, relayers: readonly Address[]): Promise<RelayChainState> {
  const block = await ctx.chain.blockNumber();
  const key = [...relayers].sort().join(",");
  const cached = ctx.relayReads;
  if (cached && cached.block === block && cached.relayers === key) return cached.value;
  // The newest head seen (an endpoint behind the others may answer an older one: it is not taken back).
  if (ctx.status.blockNumber === undefined || block > ctx.status.blockNumber) ctx.status.blockNumber = block;
  const [treasury, fees, authorised] = await Promise.all([ctx.chain.treasuryState(), currentFees(ctx), ctx.chain.authorisedRelayers(relayers)]);
  const value = { treasury, fees, authorised };
  ctx.relayReads = { block, relayers: key, value };
  return value;
}
