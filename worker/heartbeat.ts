import { countOpenRequests, deleteHeartbeat, pruneHeartbeats, upsertHeartbeat } from "@/db/queries/heartbeats";
import type { WorkerContext } from "./context";
import { processSpace } from "./host";

/**
 * The worker's heartbeat row (worker_heartbeats), written every WORKER heartbeat interval together with the lease
 * renewal. `details` is what /health and the dashboard show; its shape is documented in docs/worker.md.
 */

export const HEARTBEAT_DETAILS_VERSION = 1;

/**
 * Rows silent for this long are history, not liveness: pruned by every worker (WorkerSettings.heartbeatPruneMs), so a
 * row a crash or SIGKILL left behind leaves the dashboard without waiting for a worker to start. A worker beats every
 * 2 s, so a live one is never that silent; one frozen longer (SIGSTOP) writes its row again at its next beat.
 */
export const HEARTBEAT_RETENTION_MS = 3_600_000;

export type HeartbeatDetails = {
  version: number;
  /** The PID namespace of `pid` (worker/host.ts): another worker probes the pid only from the same one. */
  pidNamespace: string | null;
  state: "starting" | "running" | "stopping";
  /**
   * `notAuthorised`: the leased relayers while the relay stage leaves requests waiting because the treasury
   * authorises none of them (empty otherwise): /health is degraded then.
   */
  relayers: { configured: string[]; leased: string[]; withoutGas: string[]; notAuthorised: string[] };
  queue: { pending: number; approved: number; relayed: number };
  inFlight: number;
  chain: {
    reachable: boolean;
    blockNumber: string | null;
    downSince: string | null;
    lastError: string | null;
    chainId: number;
    /**
     * Each RPC_URL endpoint by its origin (its path may hold a key), in order. `coolingOffUntil`: until when reads
     * leave it aside for not answering (null: they ask it); `blockNumber`: its head at the last maintenance check that
     * it answered; `behind`: more than LAGGING_BLOCKS (3) behind the best head seen, at a head the best head had
     * passed LAGGING_MS (3 s) before, so reads leave it aside until it catches up; `chainId`: the chain id it last
     * answered (null until it has: silent since start-up); `otherChain`: that id is not the worker's, so it is left
     * aside (not read, its head ignored, sent no broadcast) until it answers the worker's again: fix RPC_URL.
     */
    endpoints: {
      endpoint: string;
      reachable: boolean;
      downSince: string | null;
      lastError: string | null;
      coolingOffUntil: string | null;
      blockNumber: string | null;
      behind: boolean;
      chainId: number | null;
      otherChain: boolean;
    }[];
  };
  treasury: { address: string; balanceWei: string; amountWei: string; paused: boolean; underfunded: boolean; checkedAt: string } | null;
  /** MAX_FEE_PER_GAS_GWEI (null when unset): whether the base fee was above it when last read, and since when. */
  fees: { ceilingWei: string; baseFeeWei: string | null; aboveCeiling: boolean; since: string | null; checkedAt: string | null } | null;
  lastError: { stage: string; message: string; at: string } | null;
  totals: Record<string, number>;
  settings: { intervalMs: number; heartbeatMs: number; relayTimeoutMs: number; maxRelayAttempts: number; batchSize: number; confirmations: number };
};

export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private readonly startedAt = new Date();
  private state: HeartbeatDetails["state"] = "starting";
  private beating: Promise<void> | undefined;
  private failingSince: number | undefined;
  // performance.now(), as failingSince: a step of the wall clock does not move them.
  private lastFailureLog = Number.NEGATIVE_INFINITY;
  private lastPrune = Number.NEGATIVE_INFINITY;

  constructor(private readonly ctx: WorkerContext) {}

  setState(state: HeartbeatDetails["state"]): void {
    this.state = state;
  }

  async details(): Promise<HeartbeatDetails> {
    const { ctx } = this;
    const queue = await countOpenRequests(ctx.db);
    const t = ctx.status.treasury;
    const health = ctx.chain.health;
    return {
      version: HEARTBEAT_DETAILS_VERSION,
      pidNamespace: processSpace().pidNamespace,
      state: this.state,
      relayers: {
        configured: ctx.pool.configured,
        leased: ctx.pool.leased,
        withoutGas: ctx.pool.leased.filter((r) => ctx.status.relayerGas.get(r)?.withoutGas),
        notAuthorised: ctx.status.relayWaiting === "relayers_not_authorised" ? [...ctx.pool.leased].sort() : [],
      },
      queue,
      inFlight: ctx.status.inFlight,
      chain: {
        reachable: health.reachable,
        blockNumber: ctx.status.blockNumber?.toString() ?? null,
        downSince: health.downSince?.toISOString() ?? null,
        lastError: health.lastError ?? null,
        chainId: ctx.chain.chainId,
        endpoints: ctx.chain.endpoints.map((e) => ({
          endpoint: new URL(e.url).origin,
          // One endpoint: the chain's own reachability (every read goes there).
          reachable: ctx.chain.endpoints.length === 1 ? health.reachable : e.reachable,
          downSince: e.downSince?.toISOString() ?? null,
          lastError: e.lastError ?? null,
          // performance.now() to the wall clock, for people reading it.
          coolingOffUntil:
            ctx.chain.endpoints.length > 1 && e.coolingOffUntilMs > performance.now()
              ? new Date(Date.now() + (e.coolingOffUntilMs - performance.now())).toISOString()
              : null,
          blockNumber: e.head?.toString() ?? null,
          behind: e.behind,
          chainId: e.chainId ?? null,
          otherChain: e.otherChain,
        })),
      },
      treasury: t
        ? {
            address: ctx.chain.treasuryAddress,
            balanceWei: t.balance.toString(),
            amountWei: t.amount.toString(),
            paused: t.paused,
            underfunded: t.underfunded,
            checkedAt: t.checkedAt.toISOString(),
          }
        : null,
      fees: ctx.feeCeiling
        ? {
            ceilingWei: ctx.feeCeiling.state.ceilingWei.toString(),
            baseFeeWei: ctx.feeCeiling.state.baseFeeWei?.toString() ?? null,
            aboveCeiling: ctx.feeCeiling.state.aboveCeiling,
            since: ctx.feeCeiling.state.since?.toISOString() ?? null,
            checkedAt: ctx.feeCeiling.state.checkedAt?.toISOString() ?? null,
          }
        : null,
      lastError: ctx.status.lastError
        ? { stage: ctx.status.lastError.stage, message: ctx.status.lastError.message, at: ctx.status.lastError.at.toISOString() }
        : null,
      totals: { ...ctx.status.totals },
      settings: {
        intervalMs: ctx.settings.intervalMs,
        heartbeatMs: ctx.settings.heartbeatMs,
        relayTimeoutMs: ctx.settings.relayTimeoutMs,
        maxRelayAttempts: ctx.settings.maxRelayAttempts,
        batchSize: ctx.settings.batchSize,
        confirmations: ctx.settings.confirmations,
      },
    };
  }

  /** One beat: renew the leases, write the row. Errors are logged, never thrown (the loop has its own). */
  async beat(): Promise<void> {
    if (this.beating) return this.beating;
    this.beating = (async () => {
      const { ctx } = this;
      try {
        await ctx.pool.renew();
        await upsertHeartbeat(ctx.db, {
          workerId: ctx.workerId,
          hostname: processSpace().hostname,
          pid: process.pid,
          startedAt: this.startedAt,
          details: await this.details(),
        });
        if (this.failingSince !== undefined) ctx.log.info("heartbeat written again", { afterMs: Math.round(performance.now() - this.failingSince) });
        this.failingSince = undefined;
        if (performance.now() - this.lastPrune >= ctx.settings.heartbeatPruneMs) {
          this.lastPrune = performance.now();
          const pruned = await pruneHeartbeats(ctx.db, HEARTBEAT_RETENTION_MS).catch(() => 0); // tried again next time
          if (pruned > 0) ctx.log.info("heartbeat rows of gone workers pruned", { rows: pruned, silentForMs: HEARTBEAT_RETENTION_MS });
        }
      } catch (error) {
        // Logged once, then every 30 s while it lasts (the loop logs the outage itself).
        const now = performance.now();
        this.failingSince ??= now;
        if (now - this.lastFailureLog >= 30_000) {
          this.lastFailureLog = now;
          ctx.log.warn("heartbeat failed", {
            error: error instanceof Error ? error.message : String(error),
            failingForMs: Math.round(now - this.failingSince),
          });
        }
      } finally {
        this.beating = undefined;
      }
    })();
    return this.beating;
  }

  start(): void {
    this.timer = setInterval(() => void this.beat(), this.ctx.settings.heartbeatMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.beating;
    await deleteHeartbeat(this.ctx.db, this.ctx.workerId);
  }
}
