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
 * an unexpected crash of the loop, a stage left without any answer: worker/loop.ts STAGE_DEADLINE_MS), so
 * `npm start` restarts it with backoff and logs why.
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
    if (error instanceof StageDeadlineError) {
      // A stage is still in flight, maybe inside a transaction that holds relayer rows: nothing more is done here
      // (giving the leases back would race it). The leases expire and the server ends the transaction.
      log.error("worker stage stuck: exiting so that it is restarted", { error, fatal: true });
      process.exit(1);
    }
    // The loop gave up (WorkerStuckError): give the leases back if possible, then exit 1 for the supervisor.
    log.error("worker loop stopped on a fatal error", { error, fatal: true });
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
