import { lastTransactionAnswerAt } from "@/db/sql/transaction";
import { ChainUnavailableError } from "./chain-answers";
import { isOutage } from "./errors";
import { Confirmer } from "./stages/confirm/confirmer";
import { currentFees, type WorkerContext } from "./context";
import { metrics } from "./metrics";
import { relayBatch } from "./stages/relay";
import { REGISTRY_INDEX_INTERVAL_MS, indexRegistry } from "./registry-index";
import { reviewPendingBatch } from "./stages/review";

/**
 * The worker's loop: one iteration runs review, relay and confirm in turn (one step at a time, so a relayer's
 * nonces are only ever touched by one stage), then sleeps until something is due:
 * - the queue (review, relay): when woken (NOTIFY from the API, or a stage that made work for another), at once
 *   or, with WORKER_BATCH_WINDOW_MS, no sooner than that after the last pass (what arrives meanwhile goes in one
 *   batch); after a full batch at once; and otherwise every WORKER_INTERVAL_MS;
 * - confirmations: every `confirmPollMs` while transactions are in flight, with the full check (receipts,
 *   timeouts, re-broadcasts) when a new block appears and at least once a second;
 * - leases (rebalance) and the hole check: every heartbeat interval.
 * An error in a stage is logged with the stage, recorded for the heartbeat, and waited out with exponential
 * backoff (RPC or database outages); other stages still run. `stop()` lets the step in flight finish. A stage left
 * without any answer ends the loop (STAGE_DEADLINE_MS).
 */

/** The default of WorkerSettings.maxBackoffMs: the longest wait between two iterations after failures. */
export const MAX_BACKOFF_MS = 10_000;
/**
 * The default of WorkerSettings.failuresBeforeExit: consecutive iterations failing with errors that are not outages
 * (a bug, a constraint the code did not expect) before the loop gives up and the process exits 1, so the supervisor
 * restarts it and logs why. Outages never count: they are waited out however long they last.
 */
export const FAILURES_BEFORE_EXIT = 30;

export class WorkerStuckError extends Error {
  override name = "WorkerStuckError";
}

/**
 * A stage that has gone this long without an answer from the chain (any call that came back, reached or not) or from
 * its database transactions (a pipelined batch answered or failed) waits for an answer that will never come: a
 * connection whose packets are dropped without a reset, or a driver that lost a statement (scripts/
 * patch-postgres.mjs). Each call a stage makes is bounded or answered in seconds (a database connection 15 s, an RPC
 * call 5 s per endpoint), so a slow stage that still progresses (hundreds of replacements against a slow node) keeps
 * answering and is never cut. The loop then ends with StageDeadlineError and the process exits 1 (once it has
 * deleted its heartbeat row, within seconds: worker.ts `stop`), so its supervisor restarts it: its leases expire, its
 * open transaction ends with its connection, and what it stored is taken up again, as after a crash. A fifth of the
 * way (a minute) the worker logs the stage it waits in, once.
 */
export const STAGE_DEADLINE_MS = 300_000;

/** A stage is still in flight (see STAGE_DEADLINE_MS): nothing more may be done on this process's state. */
export class StageDeadlineError extends WorkerStuckError {
  override name = "StageDeadlineError";
}
const FULL_CHECK_MS = 1_000;
/**
 * Idle (nothing in flight, nothing waiting to be relayed, the last full check found every relayer quiet), the full
 * check (block number, every relayer's nonces, holes) runs this often instead of every heartbeat: RPC providers
 * bill per call (issue 12 item 6). Anything stored ends the idle state at once.
 */
export const IDLE_CHECK_MS = 30_000;

type Stage = "leases" | "review" | "relay" | "confirm" | "index";

export class WorkerLoop {
  private stopping = false;
  private sleeping: { resolve: () => void; timer: NodeJS.Timeout } | undefined;
  private queueDue = true;
  // When things last ran, on performance.now() (a monotonic clock: a step of the wall clock, NTP's or an operator's,
  // neither stalls the loop nor hurries it); -Infinity: never, so each is due at the first pass.
  private lastQueueScan = Number.NEGATIVE_INFINITY;
  /** The last queue pass had a full batch: the next one runs at once, whatever the batch window. */
  private fullBatch = false;
  private lastMaintenance = Number.NEGATIVE_INFINITY;
  private lastRegistryIndex = Number.NEGATIVE_INFINITY;
  private lastFullCheck = Number.NEGATIVE_INFINITY;
  private lastBlockPoll = Number.NEGATIVE_INFINITY;
  private lastBlock: bigint | undefined;
  private lastMaintenanceCheck = Number.NEGATIVE_INFINITY;
  /** Requests the last relay pass found and left waiting (treasury, fee ceiling): not idle while some wait. */
  private relayWaiting = false;
  private failures = 0;
  private nonOutageFailures = 0;
  /** The last error of this iteration that was not an outage (a stage may fail so more than once in one). */
  private nonOutageError: { stage: Stage; message: string; error: unknown } | undefined;
  private fatal: Error | undefined;
  private readonly confirmer: Confirmer;
  private readonly erroredStages = new Set<Stage>();
  /** The stage in flight and when it started (performance.now(): a clock step does not move it). */
  private inStage: { stage: Stage; since: number } | undefined;
  /** The loop ended on StageDeadlineError: a stage is still in flight. */
  stuck = false;
  private done: Promise<void> | undefined;
  /** Called when a stage that had failed works again (e.g. to re-LISTEN after a database outage). */
  onRecovered: (() => void) | undefined;

  constructor(private readonly ctx: WorkerContext) {
    this.confirmer = new Confirmer(ctx);
  }

  /** Something may be waiting in the queue: run the queue stages now. */
  wake(): void {
    this.queueDue = true;
    if (this.sleeping) {
      clearTimeout(this.sleeping.timer);
      this.sleeping.resolve();
      this.sleeping = undefined;
    }
  }

  /** Finish the step in flight, then return from `run`. */
  stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    // A loop that ended on a fatal error has reported it through run(); stopping still completes.
    return (this.done ?? Promise.resolve()).catch(() => {});
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  run(): Promise<void> {
    this.done ??= new Promise<void>((resolve, reject) => {
      const deadline = this.ctx.settings.stageDeadlineMs;
      let warnedFor: typeof this.inStage;
      const watchdog = setInterval(
        () => {
          const current = this.inStage;
          if (!current) return;
          const lastAnswer = Math.max(current.since, this.ctx.chain.health.lastAnswerAt, lastTransactionAnswerAt(this.ctx.db) ?? 0);
          const waited = performance.now() - lastAnswer;
          // Said once per stage, a fifth of the way: the heartbeat still beats, so nothing else shows it meanwhile.
          if (waited >= deadline / 5 && warnedFor !== current) {
            warnedFor = current;
            this.ctx.log.warn("worker stage waiting: no answer from the database or the chain", {
              stage: current.stage,
              waitedMs: Math.round(waited),
              exitsAfterMs: deadline,
            });
          }
          if (waited < deadline) return;
          clearInterval(watchdog);
          // Whatever the stuck stage does if it ever returns, the loop does nothing more.
          this.stopping = true;
          this.stuck = true;
          reject(new StageDeadlineError(`stage ${current.stage}: no answer from the database or the chain for ${Math.round(deadline / 1000)} s`));
        },
        Math.max(100, Math.min(5_000, deadline / 10)),
      );
      watchdog.unref();
      this.loop()
        .then(resolve, reject)
        .finally(() => clearInterval(watchdog));
    });
    return this.done;
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      const busy = await this.iterate();
      if (this.fatal) throw this.fatal;
      if (this.stopping) break;
      await this.sleep(this.delay(busy));
    }
  }

  /** The wait after `failures` failing iterations in a row, less one: 250 ms doubling, up to maxBackoffMs. */
  private backoff(failures: number): number {
    return Math.min(this.ctx.settings.maxBackoffMs, 250 * 2 ** failures);
  }

  private delay(busy: boolean): number {
    const { settings, status } = this.ctx;
    if (this.failures > 0) return this.backoff(this.failures - 1);
    if (busy) return 0;
    const now = performance.now();
    const untilQueue = this.lastQueueScan + (this.queueDue ? this.batchWindow() : settings.intervalMs) - now;
    const untilMaintenance = this.lastMaintenance + settings.heartbeatMs - now;
    const untilConfirm = status.inFlight > 0 ? this.lastBlockPoll + settings.confirmPollMs - now : Number.POSITIVE_INFINITY;
    return Math.max(0, Math.min(untilQueue, untilMaintenance, untilConfirm));
  }

  /**
   * How long after the start of the last queue pass a wake-up waits: WORKER_BATCH_WINDOW_MS, never longer than
   * WORKER_INTERVAL_MS; none after a full batch, and none while failing (the backoff spaces the retries, and a retry
   * must run the failed stage again, or the loop would count a skipped pass as recovered).
   */
  private batchWindow(): number {
    if (this.fullBatch || this.failures > 0) return 0;
    return Math.min(this.ctx.settings.batchWindowMs, this.ctx.settings.intervalMs);
  }

  private sleep(ms: number): Promise<void> {
    if (ms <= 0 || this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.sleeping = undefined;
        resolve();
      }, ms);
      this.sleeping = { resolve, timer };
    });
  }

  /** One pass over the stages; true when a stage had a full batch (more work is waiting). */
  private async iterate(): Promise<boolean> {
    const { ctx } = this;
    const now = performance.now();
    let busy = false;
    let sent = 0;
    const failed = new Set<Stage>();

    const timings: Partial<Record<Stage, number>> = {};
    const guarded = async <T>(stage: Stage, fn: () => Promise<T>, items?: (result: T) => number): Promise<T | undefined> => {
      const started = performance.now();
      this.inStage = { stage, since: started };
      try {
        const result = await fn();
        const ms = performance.now() - started;
        timings[stage] = Math.round(ms);
        if (stage !== "leases") metrics.step(stage, ms / 1000, items ? items(result) : 0);
        return result;
      } catch (error) {
        failed.add(stage);
        this.recordError(stage, error);
        return undefined;
      } finally {
        this.inStage = undefined;
      }
    };

    const maintenance = now - this.lastMaintenance >= ctx.settings.heartbeatMs;
    if (maintenance) {
      this.lastMaintenance = now;
      await guarded("leases", () => ctx.pool.rebalance());
    }

    const sinceQueueScan = now - this.lastQueueScan;
    const queueDue = (this.queueDue && sinceQueueScan >= this.batchWindow()) || sinceQueueScan >= ctx.settings.intervalMs;
    if (queueDue) {
      this.queueDue = false;
      this.lastQueueScan = now;
      const reviewed = await guarded(
        "review",
        () => reviewPendingBatch(ctx),
        (r) => r.claimed,
      );
      if (reviewed && reviewed.claimed >= ctx.settings.batchSize) busy = true;
      if (this.stopping) return false;
      const relayed = await guarded(
        "relay",
        () => relayBatch(ctx),
        (r) => r.stored ?? 0,
      );
      if (relayed) {
        this.relayWaiting = relayed.claimed > 0 && (relayed.stored ?? 0) === 0;
        sent = relayed.stored ?? 0;
        if ((relayed.stored ?? 0) >= ctx.settings.batchSize) busy = true;
        ctx.status.relayWaiting = relayed.claimed > 0 ? relayed.waiting : undefined;
        if (relayed.waiting && relayed.waiting !== "no_relayers" && relayed.claimed > 0) this.noteWaiting(relayed.waiting);
      } else {
        // The stage failed (an outage): why it would wait is unknown now, and the heartbeat must not keep saying so.
        ctx.status.relayWaiting = undefined;
      }
    }
    if (this.stopping) return false;

    // Transactions in flight: the block number is read every confirmPollMs (not on every wake-up: a queue woken
    // by each creation would read it per request), and the full check runs on a new block, at least once a second,
    // and with the maintenance. The relay stage counts what it stored into `inFlight`, so polling starts at once.
    // Idle, the maintenance check runs every IDLE_CHECK_MS only.
    const idle = ctx.status.inFlight === 0 && !this.relayWaiting && !ctx.feeCeiling?.state.aboveCeiling && this.confirmer.isQuiet(ctx.pool.leased);
    const maintenanceCheck = maintenance && (!idle || now - this.lastMaintenanceCheck >= Math.max(IDLE_CHECK_MS, ctx.settings.heartbeatMs));
    if (maintenanceCheck) this.lastMaintenanceCheck = now;
    const fullDue = maintenanceCheck || now - this.lastFullCheck >= FULL_CHECK_MS;
    const pollDue = now - this.lastBlockPoll >= ctx.settings.confirmPollMs;
    if ((ctx.status.inFlight > 0 && pollDue) || maintenanceCheck) {
      await guarded(
        "confirm",
        async () => {
          this.lastBlockPoll = now;
          // The maintenance check reads every endpoint's head (one call each): which are behind, which answer again.
          const block = maintenanceCheck ? await ctx.chain.surveyHead() : await ctx.chain.blockNumber();
          const newBlock = block !== this.lastBlock;
          ctx.status.blockNumber = block;
          if (!newBlock && !fullDue) return 0;
          this.lastBlock = block;
          this.lastFullCheck = now;
          const started = performance.now();
          const outcome = await this.confirmer.run({ checkHoles: maintenanceCheck, head: block });
          ctx.status.checkedBlock = block;
          ctx.status.checkedAt = Date.now();
          if (outcome.settled > 0) {
            ctx.log.debug("confirmed", { block, settled: outcome.settled, open: outcome.open, ms: Math.round(performance.now() - started) });
          }
          // A settled attempt may leave its request needing the next attempt: look at the queue again.
          if (outcome.settled > 0) this.queueDue = true;
          return outcome.settled;
        },
        (settled) => settled,
      );
    }

    // The registry's mirror, with the maintenance (its head block was just read), every few seconds.
    const head = ctx.status.blockNumber;
    if (maintenance && head !== undefined && now - this.lastRegistryIndex >= REGISTRY_INDEX_INTERVAL_MS && !failed.has("confirm")) {
      this.lastRegistryIndex = now;
      await guarded(
        "index",
        () => indexRegistry(ctx, head),
        (r) => r.wallets,
      );
    }

    // Above the fee ceiling with nothing waiting to be signed, the fees are still read (once per maintenance, when
    // the block changed) so the episode ends by itself when they fall.
    if (maintenance && ctx.feeCeiling?.state.aboveCeiling) await guarded("relay", () => currentFees(ctx));

    // A full batch means more is waiting: scan the queue again at once.
    if (queueDue) this.fullBatch = busy;
    if (busy) this.queueDue = true;
    if (busy || sent > 0) ctx.log.debug("iteration", { ms: timings, sent, busy, inFlight: ctx.status.inFlight });

    // Iterations in a row, not errors: two stages failing in one iteration count once, and an iteration that failed
    // only with outages (waited out, never counted) ends the row.
    const bug = this.nonOutageError;
    this.nonOutageError = undefined;
    if (bug === undefined) this.nonOutageFailures = 0;
    else if (++this.nonOutageFailures >= ctx.settings.failuresBeforeExit) {
      this.fatal = new WorkerStuckError(`stage ${bug.stage} failed ${this.nonOutageFailures} iterations in a row: ${bug.message}`, { cause: bug.error });
    }
    if (failed.size === 0) {
      if (this.failures > 0) {
        ctx.log.info("worker recovered", { after: this.failures, stages: [...this.erroredStages] });
        this.erroredStages.clear();
        this.onRecovered?.();
      }
      this.failures = 0;
    } else {
      for (const s of failed) this.erroredStages.add(s);
      this.failures++;
      // Wake-ups may be lost while failing (a LISTEN connection down): the retry scans the queue.
      this.queueDue = true;
    }
    return busy;
  }

  private lastWaitingLog = Number.NEGATIVE_INFINITY;
  private noteWaiting(why: string): void {
    const now = performance.now();
    if (now - this.lastWaitingLog < 30_000) return;
    this.lastWaitingLog = now;
    const t = this.ctx.status.treasury;
    const f = this.ctx.feeCeiling?.state;
    this.ctx.log.warn("relay waiting: requests stay approved, no attempt is used", {
      why,
      treasuryBalanceWei: t?.balance,
      amountWei: t?.amount,
      paused: t?.paused,
      ...(why === "fees_above_ceiling" && f ? { baseFeeWei: f.baseFeeWei, ceilingWei: f.ceilingWei } : {}),
    });
  }

  private recordError(stage: Stage, error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    this.ctx.status.lastError = { stage, message, at: new Date() };
    const fields = { stage, consecutiveFailures: this.failures + 1, nextRetryMs: this.backoff(this.failures) };
    if (error instanceof ChainUnavailableError) this.ctx.log.warn("chain unavailable, backing off", { ...fields, error: message });
    else if (isOutage(error)) this.ctx.log.warn("database unavailable, backing off", { ...fields, error: message });
    else {
      this.ctx.log.error("worker stage failed, backing off", { ...fields, error });
      this.nonOutageError = { stage, message, error };
    }
  }
}
