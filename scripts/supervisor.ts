import { spawn, type ChildProcess } from "node:child_process";
import type { Logger } from "@/lib/log";
import { openLogFile } from "@/lib/log-file";

/**
 * Keeps a child process running: restarts it when it exits unexpectedly, with exponential backoff (reset once it
 * has stayed up for a while), and logs why it went. `stop()` asks it to finish (SIGTERM) and waits; it answers
 * whether the child stopped cleanly (see `Supervised.stop`).
 */

export type SupervisedOptions = {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  logger: Logger;
  /** The child's stdout and stderr are also appended here. */
  logFile?: string;
  /** Called with every new pid (for the process file and for tests). */
  onStart?: (pid: number) => void;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** A child that stayed up this long is considered healthy again: the backoff starts over. */
  stableAfterMs?: number;
  /** How long a child may take to stop after SIGTERM before it is killed. */
  stopTimeoutMs?: number;
};

export type Supervised = {
  readonly pid: number | undefined;
  readonly restarts: number;
  /**
   * SIGTERM, SIGKILL after `stopTimeoutMs`, and waits. True when the child stopped cleanly: exited with code 0 (or by
   * the SIGTERM itself), or was not running; false when it had to be killed or exited with another code.
   */
  stop: () => Promise<boolean>;
};

export function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  if (signal) return `killed by ${signal}`;
  return `exited with code ${code}`;
}

export function supervise(options: SupervisedOptions): Supervised {
  const minBackoff = options.minBackoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 30_000;
  const stableAfter = options.stableAfterMs ?? 60_000;
  const log = options.logger.child({ process: options.name });
  const file = options.logFile ? openLogFile(options.logFile, log) : undefined;

  let child: ChildProcess | undefined;
  let stopping = false;
  let restarts = 0;
  let backoff = minBackoff;
  let timer: NodeJS.Timeout | undefined;
  let exited: Promise<void> = Promise.resolve();
  /** How the child that was running when stop() came ended: clean or not. */
  let stoppedCleanly = true;

  const start = () => {
    timer = undefined;
    if (stopping) return;
    const startedAt = performance.now();
    // Its own process group: a signal to the supervisor's whole group (Ctrl-C in a terminal, a process manager
    // signalling the group) reaches the supervisor alone, which then stops the children in order. A child whose
    // supervisor is gone stops by itself (lib/supervised.ts).
    const proc = spawn(options.command, options.args, {
      cwd: options.cwd,
      env: { ...options.env, SUPERVISOR_PID: String(process.pid) },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    child = proc;
    proc.stdout?.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      file?.write(chunk);
    });
    proc.stderr?.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk);
      file?.write(chunk);
    });
    const ended = (exit: string, clean: boolean) => {
      if (child === proc) child = undefined;
      if (stopping) {
        stoppedCleanly = clean;
        if (clean) log.info("stopped", { exit });
        else log.warn("did not stop cleanly", { exit });
        return;
      }
      const upMs = Math.round(performance.now() - startedAt);
      if (upMs >= stableAfter) backoff = minBackoff;
      restarts += 1;
      log.error("exited unexpectedly; restarting", { exit, upMs, restartInMs: backoff, restarts });
      timer = setTimeout(start, backoff);
      backoff = Math.min(backoff * 2, maxBackoff);
    };
    exited = new Promise<void>((resolve) => {
      // "exit" can come before the child's last output has been read from its pipes; "close" comes after. A
      // grandchild still holding the pipes would delay "close" for ever, so the wait for it is bounded.
      proc.once("close", () => resolve());
      proc.once("exit", (code, signal) => {
        setTimeout(resolve, 2_000).unref();
        ended(describeExit(code, signal), code === 0 || signal === "SIGTERM");
      });
    });
    // A spawn that failed (EAGAIN, ENOENT...) comes as "error" and never as "exit": it is retried with the same
    // backoff as a child that died at once. Later errors (a failed kill) are only logged.
    proc.on("error", (error) => {
      if (proc.pid !== undefined) return log.error("child process error", { error });
      log.error("could not start", { error });
      ended("not started", true);
    });
    if (proc.pid) {
      log.info("started", { pid: proc.pid });
      options.onStart?.(proc.pid);
    }
  };

  start();

  return {
    get pid() {
      return child?.pid;
    },
    get restarts() {
      return restarts;
    },
    stop: async () => {
      stopping = true;
      if (timer) clearTimeout(timer);
      const proc = child;
      let killer: NodeJS.Timeout | undefined;
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        killer = setTimeout(() => {
          log.warn("did not stop in time; killing", { pid: proc.pid });
          proc.kill("SIGKILL");
        }, options.stopTimeoutMs ?? 20_000);
      }
      // Running or exited already, the child's output may still be in its pipes (or a grandchild holding them):
      // its close is waited for (bounded, see above) before the log file ends.
      await exited;
      clearTimeout(killer);
      file?.close();
      return stoppedCleanly;
    },
  };
}

/** A service the supervisor started in-process (embedded PostgreSQL, the local chain): how to watch and stop it. */
export type ServiceHandle = {
  pid: number;
  /** Resolves when the service has gone, stopped or killed. */
  exited: Promise<void>;
  /** Resolves once it has gone; false when it had to be forced (killed after its time to stop). */
  stop: () => Promise<boolean>;
};

export type SupervisedServiceOptions = {
  name: string;
  logger: Logger;
  /** The running instance, started by the caller (start-up needs it before anything else runs). */
  first: ServiceHandle;
  /** Starts it again (on the same data: PostgreSQL's crash recovery, the chain's state dump). */
  restart: () => Promise<ServiceHandle>;
  onStart?: (pid: number) => void;
  /**
   * Whether a service that went should be started again; false once the caller is shutting down: a service may end
   * by itself before the caller comes to stop it (a signal sent to it too, a crash).
   */
  keepRunning?: () => boolean;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  stableAfterMs?: number;
  /** How long `stop()` waits for a restart in progress to finish, to stop what it started (default 60 s). */
  startWaitMs?: number;
};

export type SupervisedService = {
  readonly pid: number | undefined;
  readonly restarts: number;
  /**
   * Stops the running instance, or the one a restart in progress starts (waited for at most `startWaitMs`); false
   * when it had to be forced, or the restart was still going at the end of that wait (the caller then kills it).
   */
  stop: () => Promise<boolean>;
};

/**
 * Keeps a service running like `supervise` keeps a child: when it dies it is started again, with exponential
 * backoff (reset once it stayed up for `stableAfterMs`), until `stop()`. A restart that fails is retried likewise.
 */
export function superviseService(options: SupervisedServiceOptions): SupervisedService {
  const minBackoff = options.minBackoffMs ?? 500;
  const maxBackoff = options.maxBackoffMs ?? 10_000;
  const stableAfter = options.stableAfterMs ?? 60_000;
  const startWait = options.startWaitMs ?? 60_000;
  const log = options.logger.child({ process: options.name });
  let current: ServiceHandle | undefined = options.first;
  let stopping = false;
  let restarts = 0;
  let backoff = minBackoff;
  let wake: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => (clearTimeout(timer), resolve());
    });

  /** Ends once stopping (or not restarted); false when an instance a restart started during stop() had to be forced. */
  const loop = (async (): Promise<boolean> => {
    let startedAt = performance.now();
    while (!stopping && current) {
      await current.exited;
      if (stopping) return true;
      if (options.keepRunning?.() === false) {
        log.info("exited while shutting down; not restarted", { pid: current.pid });
        return true;
      }
      const upMs = Math.round(performance.now() - startedAt);
      if (upMs >= stableAfter) backoff = minBackoff;
      log.error("exited unexpectedly; restarting", { pid: current.pid, upMs, restartInMs: backoff });
      current = undefined;
      while (!stopping && !current) {
        await pause(backoff);
        backoff = Math.min(backoff * 2, maxBackoff);
        if (stopping) return true;
        // The caller's shutdown began during the backoff or the last try (which it may have cut short): no more tries.
        if (options.keepRunning?.() === false) {
          log.info("not restarted: shutting down", {});
          return true;
        }
        try {
          const next = await options.restart();
          restarts += 1;
          if (stopping) {
            log.info("restarted while stopping; stopping it", { pid: next.pid });
            return await next.stop();
          }
          current = next;
          startedAt = performance.now();
          log.info("restarted", { pid: next.pid, restarts });
          options.onStart?.(next.pid);
        } catch (error) {
          if (stopping) log.warn("could not restart, while stopping", { error });
          else if (options.keepRunning?.() === false)
            log.info("restart cut short by the shutdown", { error: error instanceof Error ? error.message : String(error) });
          else log.error("could not restart; retrying", { error, restartInMs: backoff });
        }
      }
    }
    return true;
  })();

  return {
    get pid() {
      return current?.pid;
    },
    get restarts() {
      return restarts;
    },
    stop: async () => {
      stopping = true;
      wake?.();
      const running = current;
      const clean = running ? await running.stop() : true;
      // A restart in progress (a killed PostgreSQL coming back) is waited for, bounded: its start may never end.
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([loop, new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), startWait)))]);
      clearTimeout(timer);
      if (ended === "timeout") {
        log.error(`still restarting after ${startWait / 1000} s; left to the caller to kill`);
        return false;
      }
      return clean && ended;
    },
  };
}
