import { ConfigError, getConfig } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { stopWhenSupervisorGone } from "@/lib/supervised";
import { StageDeadlineError } from "./loop";
import { FatalWorkerError, startWorker, type RunningWorker } from "./worker";

/**
 * `npm run worker` (and the worker child of `npm start`): drives every sponsorship request through review, relay
 * and confirm (docs/worker.md). Configured only through lib/config.ts.
 *
 * Exit codes, for the supervisor: 0 after a graceful stop (SIGTERM/SIGINT: the step in flight finishes, leases
 * are given back, the heartbeat row is removed); 1 on a fatal error (bad configuration, no contracts, wrong chain,
 * an unexpected crash of the loop, a stage left without any answer: worker/loop.ts STAGE_DEADLINE_MS, after which
 * the heartbeat row is removed too but the leases are left to expire), so `npm start` restarts it with backoff and
 * logs why.
 */

const log = createLogger({ component: "worker" });
// Below the supervisor's 20 s before it sends SIGKILL.
const SHUTDOWN_LIMIT_MS = 15_000;

async function main(): Promise<void> {
  const config = getConfig();
  const running: { worker?: RunningWorker } = {};
  let signalled = false;

  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn("second signal: exiting now", { signal });
      process.exit(1);
    }
    signalled = true;
    log.info("signal received", { signal });
    const worker = running.worker;
    if (!worker) process.exit(0); // still starting: nothing in flight
    const limit = setTimeout(() => {
      log.error("graceful shutdown took too long; exiting", { limitMs: SHUTDOWN_LIMIT_MS });
      process.exit(1);
    }, SHUTDOWN_LIMIT_MS);
    limit.unref();
    worker.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error("shutdown failed", { error });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  stopWhenSupervisorGone(config);

  running.worker = await startWorker({ config, log });
  try {
    await running.worker.done;
  } catch (error) {
    // A stage still in flight (StageDeadlineError), maybe inside a transaction that holds relayer rows: stop() keeps
    // the leases (giving them back would race it; they expire and the server ends the transaction), deletes the
    // heartbeat row and closes the connections at once. Otherwise the loop gave up (WorkerStuckError): the leases are
    // given back if possible. Either way exit 1 for the supervisor.
    log.error(error instanceof StageDeadlineError ? "worker stage stuck: exiting so that it is restarted" : "worker loop stopped on a fatal error", {
      error,
      fatal: true,
    });
    const limit = setTimeout(() => process.exit(1), SHUTDOWN_LIMIT_MS);
    limit.unref();
    await running.worker.stop().catch(() => {});
    process.exit(1);
  }
  // Otherwise the loop only ends through stop(); onSignal exits once stop() has finished.
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof FatalWorkerError) {
    log.error(`worker cannot start: ${error.message}`, { fatal: true });
  } else {
    log.error("worker crashed", { error, fatal: true });
  }
  process.exit(1);
});
