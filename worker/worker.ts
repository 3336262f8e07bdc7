import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { closeDatabase, createDatabase, type Database } from "@/db/client";
import { applyMigrations, functionsNotice } from "@/db/migrate";
import { WAKEUP_CHANNEL } from "@/db/queries/wakeup";
import { resolveDeployment } from "@/lib/chain/deployment";
import { MAX_SOCKETS } from "@/lib/chain/node-fetch";
import { ConfigError, developmentSecretsRefusal, type Config } from "@/lib/config";
import type { Logger } from "@/lib/log";
import { startProcessMetricsServer } from "@/lib/metrics";
import { withTimeout } from "@/lib/with-timeout";
import { WorkerChain, workerEndpoints } from "./chain";
import { ChainHealth, ChainUnavailableError } from "./chain-answers";
import { emptyTotals, type WorkerContext, type WorkerSettings } from "./context";
import { FatalWorkerError, isDatabaseOverloaded, isDatabaseUnavailable } from "./errors";
import { FeeCeilingWatch } from "./fee-ceiling";
import { Heartbeat } from "./heartbeat";
import { FAILURES_BEFORE_EXIT, MAX_BACKOFF_MS, STAGE_DEADLINE_MS, WorkerLoop } from "./loop";
import { RelayerPool } from "./relayers";
import { REPLAY_PATIENCE_MS } from "./stages/confirm/state";
import { startWorkerWebhooks, type WorkerWebhookOptions, type WorkerWebhooks } from "./webhooks";

/**
 * Assembles one worker from the configuration: database, chain, relayer leases, heartbeat, LISTEN wake-ups and
 * the loop. `start()` waits out an unreachable database or chain (with backoff, logged) and refuses for good only
 * what waiting cannot fix (FatalWorkerError: no contracts configured, wrong chain, no contract code).
 */

export { FatalWorkerError } from "./errors";

export type WorkerOptions = {
  config: Config;
  log: Logger;
  /** Overrides for tests (faster heartbeats, shorter leases). */
  settings?: Partial<WorkerSettings>;
  /** Webhook dispatcher and alert settings (tests: short backoff). */
  webhooks?: WorkerWebhookOptions;
};

export type RunningWorker = {
  workerId: string;
  ctx: WorkerContext;
  webhooks: WorkerWebhooks;
  /** Resolves when the loop has ended (after `stop`). */
  done: Promise<void>;
  /** Finish the step in flight, give the leases back, remove the heartbeat, close connections. */
  stop: () => Promise<void>;
};

/**
 * The worker pool's answer timeout (WorkerSettings.databaseAnswerTimeoutMs). Its statements have no statement_timeout;
 * the longest legitimate one waits on a row lock another worker holds while it waits on the chain (at most
 * CHAIN_WAIT_IN_TRANSACTION_MS, 6 s) and is ended by idle_in_transaction_session_timeout (15 s) at worst. The prune of old
 * webhook events runs in batches of 5,000 (pruneWebhookEvents), each far inside it: a statement this side gives up on
 * is not completed by the server once it cannot send its answer.
 */
const DATABASE_ANSWER_TIMEOUT_MS = 60_000;

/** How long setting up LISTEN may take before the worker polls instead (worker.ts `listen`). */
const LISTEN_SETUP_MS = 15_000;

/** How long the stuck-stage exit waits to delete its heartbeat row (worker.ts `stop`), well within index.ts's limit. */
const STUCK_EXIT_ROW_MS = 5_000;

export function workerSettings(config: Config, overrides: Partial<WorkerSettings> = {}): WorkerSettings {
  return {
    batchSize: config.workerBatchSize,
    maxRelayAttempts: config.maxRelayAttempts,
    relayTimeoutMs: config.relayTimeoutMs,
    confirmations: config.confirmations,
    intervalMs: config.workerIntervalMs,
    batchWindowMs: config.workerBatchWindowMs,
    heartbeatMs: 2_000,
    heartbeatPruneMs: 300_000,
    leaseTtlMs: 15_000,
    confirmPollMs: 50,
    stageDeadlineMs: STAGE_DEADLINE_MS,
    databaseAnswerTimeoutMs: DATABASE_ANSWER_TIMEOUT_MS,
    replayPatienceMs: REPLAY_PATIENCE_MS,
    failuresBeforeExit: FAILURES_BEFORE_EXIT,
    maxBackoffMs: MAX_BACKOFF_MS,
    crashAfterBroadcasts: config.workerTestCrashAfterBroadcasts,
    ...overrides,
  };
}

async function untilReady<T>(what: string, log: Logger, attempt: () => Promise<T>, stopped: () => boolean): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await attempt();
    } catch (error) {
      // Only an unreachable database or chain, or a table's lock the migrations could not get in time (db/migrate.ts
      // MIGRATION_LOCK_TIMEOUT_MS), is waited for; anything else (a failing migration) is fatal.
      const outage = error instanceof ChainUnavailableError || isDatabaseUnavailable(error) || isDatabaseOverloaded(error);
      if (!outage || error instanceof FatalWorkerError || error instanceof ConfigError || stopped()) throw error;
      const waitMs = Math.min(10_000, 250 * 2 ** failures);
      log.warn(`${what} not reachable at start-up, retrying`, {
        attempt: failures + 1,
        retryInMs: waitMs,
        error: error instanceof Error ? error.message : String(error),
      });
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}

export async function startWorker(options: WorkerOptions): Promise<RunningWorker> {
  const { config } = options;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;
  const log = options.log.child({ workerId });
  let stopped = false;

  if (!config.databaseUrl) throw new FatalWorkerError("DATABASE_URL is not set: start the worker with `npm start`, which provides it, or set it");
  if (config.rpcUrls.length === 0) throw new FatalWorkerError("RPC_URL is not set: start the worker with `npm start`, which provides it, or set it");
  const deployment = resolveDeployment(config);
  if (!deployment) {
    throw new FatalWorkerError("no contracts configured: set REGISTRY_ADDRESS and TREASURY_ADDRESS, or let `npm start` deploy to the local chain");
  }
  const databaseUrl = config.databaseUrl;
  const rpcUrl = config.rpcUrls;

  // The endpoints' breakers, shared by start-up's reads and the worker's (lib/chain/endpoint-breaker.ts): an endpoint
  // that does not answer at start-up is left aside at once. Logged by position and origin (a path may hold a key).
  const endpoints = workerEndpoints(rpcUrl, (index, url, change) => {
    const fields = { endpoint: index + 1, origin: new URL(url).origin };
    if (change.kind === "cooling_off") log.warn("RPC endpoint not answering: reads ask the others for a while", { ...fields, ...change });
    else if (change.kind === "answers_again") log.info("RPC endpoint answers again", { ...fields, downForMs: change.downForMs });
    else if (change.kind === "behind") {
      log.warn("RPC endpoint behind the others: reads leave it aside until it catches up", {
        ...fields,
        head: change.head,
        bestHead: change.bestHead,
        behindBy: change.bestHead - change.head,
      });
    } else if (change.kind === "other_chain") {
      // An operator's mistake (a mainnet URL beside the testnet's) that start-up could not see (the endpoint was
      // silent then), or an endpoint that changed networks since. The worker goes on with the others, as it did before
      // this endpoint answered; with none left, it waits as in an outage.
      log.error("RPC endpoint serves another chain: left aside until it serves this one again (fix RPC_URL)", {
        ...fields,
        chainId: change.chainId,
        expectedChainId: change.expectedChainId,
      });
    } else if (change.kind === "serves_chain") log.info("RPC endpoint serves this chain again", { ...fields, chainId: change.chainId });
    else log.info("RPC endpoint caught up", { ...fields, head: change.head, bestHead: change.bestHead });
  });

  const notice = functionsNotice(
    await untilReady(
      "database",
      log,
      () =>
        applyMigrations(databaseUrl, {
          stopped: () => stopped,
          onLockWait: (holderPid, waitedMs) => log.warn("waiting for another process that applies the migrations", { holderPid, waitedMs }),
        }),
      () => stopped,
    ),
  );
  if (notice) log.warn(notice.message, notice.fields);
  const chainId = await untilReady(
    "chain",
    log,
    () => WorkerChain.readChainId(rpcUrl, { endpoints }),
    () => stopped,
  );
  // Anvil's well-known keys sign for the local chain only. Configuration parsing refuses them with a remote RPC_URL;
  // a loopback one without CHAIN_ID may be a tunnel to a real network, so the chain's own answer decides here, as
  // `npm start` does before it starts the worker (the worker run alone gets the same check).
  const refusal = developmentSecretsRefusal(config, chainId);
  if (refusal) throw new FatalWorkerError(refusal);
  for (const expected of [deployment.chainId, config.chainId]) {
    if (expected !== undefined && expected !== chainId) {
      throw new FatalWorkerError(`the RPC serves chain ${chainId}, but the deployment is on chain ${expected}`);
    }
  }

  const health = new ChainHealth((reachable, detail) => {
    if (reachable) log.info("chain reachable again", { downForMs: detail.downForMs });
    else log.warn("chain unreachable", { error: detail.error });
  });
  const chain = new WorkerChain({
    rpcUrl,
    chainId,
    registryAddress: deployment.registryAddress,
    treasuryAddress: deployment.treasuryAddress,
    registryFromBlock: deployment.deployBlock === undefined ? undefined : BigInt(deployment.deployBlock),
    batchSize: config.rpcBatchSize,
    health,
    endpoints,
    onLogWindowNarrowed: ({ blocks, refusedBlocks, error }) =>
      log.warn("the RPC refused eth_getLogs over a block range: narrower ranges are asked from now on", {
        refusedBlocks: Number(refusedBlocks),
        blocks: Number(blocks),
        error,
      }),
  });
  const code = await untilReady(
    "chain",
    log,
    () => chain.client.getCode({ address: deployment.treasuryAddress }),
    () => stopped,
  );
  if (!code || code === "0x") {
    throw new FatalWorkerError(`no contract at TREASURY_ADDRESS ${deployment.treasuryAddress} on chain ${chainId} (a reset chain?)`);
  }
  // Review reads isSponsored from REGISTRY_ADDRESS while the treasury refuses by its own registry: a registry of
  // another deployment would silently approve sponsored wallets (then fail on-chain) and reject others.
  const registryOfTreasury = await untilReady(
    "chain",
    log,
    () => chain.treasuryRegistry(),
    () => stopped,
  ).catch((error: unknown) => {
    if (error instanceof ChainUnavailableError) throw error;
    throw new FatalWorkerError(`TREASURY_ADDRESS ${deployment.treasuryAddress} is not a sponsorship treasury (registry() cannot be read)`);
  });
  if (registryOfTreasury !== deployment.registryAddress.toLowerCase()) {
    throw new FatalWorkerError(
      `REGISTRY_ADDRESS ${deployment.registryAddress} is not the registry of TREASURY_ADDRESS ${deployment.treasuryAddress} (its registry is ${registryOfTreasury})`,
    );
  }

  // A worker frozen inside a transaction (SIGSTOP, a paused container) would hold its relayer's row lock and the
  // requests it claimed for ever, and another worker taking the expired lease over would wait on that lock: the
  // server ends such a session. The longest legitimate idle gap inside a worker transaction is a stage's wait on the
  // chain, bounded by CHAIN_WAIT_IN_TRANSACTION_MS (6 s, worker/chain.ts: reads failing over from endpoint to endpoint
  // could take 5 s each), or signing a batch.
  const settings = workerSettings(config, options.settings);
  const db: Database = createDatabase(databaseUrl, {
    max: 6,
    applicationName: "sponsorship-worker",
    idleInTransactionTimeoutMs: 15_000,
    answerTimeoutMs: settings.databaseAnswerTimeoutMs,
  });
  const pool = new RelayerPool({
    db,
    chain,
    log,
    workerId,
    keys: config.relayerPrivateKeys,
    leaseTtlMs: settings.leaseTtlMs,
    onLeaseChange: (address) => ctx.status.relayerGas.delete(address),
  });
  const ctx: WorkerContext = {
    workerId,
    actor: `worker:${workerId}`,
    settings,
    db,
    chain,
    pool,
    log,
    status: {
      treasury: undefined,
      pause: undefined,
      relayWaiting: undefined,
      lastError: undefined,
      blockNumber: undefined,
      checkedBlock: undefined,
      checkedAt: undefined,
      inFlight: 0,
      relayerGas: new Map(),
      totals: emptyTotals(),
    },
    fees: undefined,
    feeCeiling: config.maxFeePerGasWei === undefined ? undefined : new FeeCeilingWatch(config.maxFeePerGasWei),
    wake: () => {},
  };
  if (ctx.feeCeiling) {
    // The start and the end of each episode, once (the hook for the `fees.above_ceiling` alert).
    ctx.feeCeiling.onChange = (change) => {
      if (change.aboveCeiling) {
        log.warn("fees above MAX_FEE_PER_GAS_GWEI: new relays wait, stuck ones are not replaced", {
          baseFeeWei: change.baseFeeWei,
          ceilingWei: change.ceilingWei,
        });
      } else {
        log.info("fees back under MAX_FEE_PER_GAS_GWEI: relays move again", {
          baseFeeWei: change.baseFeeWei,
          ceilingWei: change.ceilingWei,
          lastedMs: change.lastedMs,
        });
      }
    };
  }
  const heartbeat = new Heartbeat(ctx);
  const loop = new WorkerLoop(ctx);
  ctx.wake = () => loop.wake();

  try {
    await untilReady(
      "database",
      log,
      () => pool.register(chainId),
      () => stopped,
    );
    // The first beat comes before any lease: other workers must see this one alive to share relayers with it.
    await heartbeat.beat();
    heartbeat.start();
  } catch (error) {
    await closeDatabase(db).catch(() => {});
    throw error;
  }

  // Wake-ups: the API NOTIFYs after each creation (coalesced, db/queries/wakeup.ts); a (re)established LISTEN also
  // wakes (notifications may have been missed while it was down). After a database outage LISTEN is set up again,
  // on a client of its own that replaces the last one: postgres.js re-LISTENs by itself when its connection comes
  // back, but gives up if the database is still away, and the listeners it re-created are not the ones an unlisten()
  // handle knows, so setting up again on the same client added one more each outage (each NOTIFY then woke the
  // loop, and logged, once per outage survived). Ending the old client ends whatever it still held.
  // One set-up at a time (recoveries can come while one is under way), each replacing the last; none once stopping.
  // A LISTEN that is never answered (packets dropped) is given up after LISTEN_SETUP_MS: polling covers the gap.
  let listening: Database | undefined;
  let candidate: Database | undefined;
  const listen = async () => {
    const previous = listening;
    listening = undefined;
    if (previous) await closeDatabase(previous).catch(() => {});
    if (stopped) return;
    const client = createDatabase(databaseUrl, { max: 1, applicationName: "sponsorship-worker" });
    candidate = client;
    try {
      await withTimeout(
        client.$client.listen(
          WAKEUP_CHANNEL,
          () => loop.wake(),
          () => {
            log.info("listening for wake-ups", { channel: WAKEUP_CHANNEL });
            loop.wake();
          },
        ),
        LISTEN_SETUP_MS,
        () => new Error(`no answer within ${LISTEN_SETUP_MS} ms`),
      );
      if (stopped) throw new Error("stopping");
      listening = client;
    } catch (error) {
      if (!stopped)
        log.warn("LISTEN failed; polling every WORKER_INTERVAL_MS until it works", { error: error instanceof Error ? error.message : String(error) });
      await closeDatabase(client).catch(() => {});
    } finally {
      candidate = undefined;
    }
  };
  let settingUp = listen();
  await settingUp;
  loop.onRecovered = () => void (settingUp = settingUp.then(listen, listen));
  const webhooks = await untilReady(
    "database",
    log,
    () => startWorkerWebhooks(ctx, config, options.webhooks),
    () => stopped,
  );

  if (config.relayerPrivateKeys.length === 0) log.warn("no RELAYER_PRIVATE_KEYS: this worker reviews requests but relays nothing");
  // A review of a full batch makes WORKER_BATCH_SIZE + 1 calls, in requests of RPC_BATCH_SIZE over MAX_SOCKETS
  // connections: more rounds than that one after another may not fit its calls' 5-s timeout against a remote RPC.
  const rounds = Math.ceil((settings.batchSize + 1) / config.rpcBatchSize / MAX_SOCKETS);
  if (rounds > 2) {
    log.warn(
      "RPC_BATCH_SIZE is small for WORKER_BATCH_SIZE: a full review takes several round trips one after another; lower WORKER_BATCH_SIZE if reviews time out",
      {
        rpcBatchSize: config.rpcBatchSize,
        workerBatchSize: settings.batchSize,
        roundTrips: rounds,
        suggestedWorkerBatchSize: Math.max(1, 2 * config.rpcBatchSize * MAX_SOCKETS - 1),
      },
    );
  }
  log.info("worker started", {
    chainId,
    treasury: deployment.treasuryAddress,
    registry: deployment.registryAddress,
    relayers: pool.configured,
    intervalMs: settings.intervalMs,
    relayTimeoutMs: settings.relayTimeoutMs,
    maxRelayAttempts: settings.maxRelayAttempts,
    confirmations: settings.confirmations,
    maxFeePerGasWei: config.maxFeePerGasWei ?? null,
  });
  // METRICS_PORT + 1 on loopback, when METRICS_PORT is set (lib/metrics).
  const metricsServer = await startProcessMetricsServer("worker", log);
  heartbeat.setState("running");
  const done = loop.run();

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      stopped = true;
      log.info("worker stopping: finishing the step in flight");
      await loop.stop();
      heartbeat.setState("stopping");
      if (loop.stuck) {
        // A stage is still in flight (StageDeadlineError) and may hold the relayer rows: the heartbeat row is deleted
        // first (it could not be after, and left it shows a dead worker until it is pruned), within a bound, as a
        // database that does not answer leaves the row to the prune; then the connections are closed, so nothing of
        // the stage is written after, and the leases are left to expire.
        await withTimeout(heartbeat.stop(), STUCK_EXIT_ROW_MS, () => new Error(`no answer within ${STUCK_EXIT_ROW_MS} ms`)).catch((error: unknown) =>
          log.warn("heartbeat row left behind (pruned later)", { error: error instanceof Error ? error.message : String(error) }),
        );
        await closeDatabase(db).catch(() => {});
      }
      await webhooks.stop().catch(() => {});
      try {
        // Ends a set-up under way too (it then closes its client itself).
        await Promise.all([listening, candidate].map((client) => client && closeDatabase(client).catch(() => {})));
        if (!loop.stuck) {
          await pool.releaseAll();
          await heartbeat.stop();
        }
      } catch (error) {
        log.warn("clean shutdown incomplete (leases expire by themselves)", { error: error instanceof Error ? error.message : String(error) });
      }
      await metricsServer?.close().catch(() => {});
      await closeDatabase(db).catch(() => {});
      log.info("worker stopped", { totals: ctx.status.totals });
    })());

  return { workerId, ctx, webhooks, done, stop };
}
