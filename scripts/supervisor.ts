import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, type WriteStream } from "node:fs";
import type { Logger } from "@/lib/log";

/**
 * Keeps a child process running: restarts it when it exits unexpectedly, with exponential backoff (reset once it
 * has stayed up for a while), and logs why it went. `stop()` asks it to finish (SIGTERM) and waits.
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
  stop: () => Promise<void>;
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
  const file: WriteStream | undefined = options.logFile ? createWriteStream(options.logFile, { flags: "a" }) : undefined;

  let child: ChildProcess | undefined;
  let stopping = false;
  let restarts = 0;
  let backoff = minBackoff;
  let timer: NodeJS.Timeout | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = () => {
    timer = undefined;
    if (stopping) return;
    const startedAt = Date.now();
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
    exited = new Promise<void>((resolve) => {
      proc.once("exit", (code, signal) => {
        resolve();
        if (child === proc) child = undefined;
        if (stopping) {
          log.info("stopped", { exit: describeExit(code, signal) });
          return;
        }
        const upMs = Date.now() - startedAt;
        if (upMs >= stableAfter) backoff = minBackoff;
        restarts += 1;
        log.error("exited unexpectedly; restarting", { exit: describeExit(code, signal), upMs, restartInMs: backoff, restarts });
        timer = setTimeout(start, backoff);
        backoff = Math.min(backoff * 2, maxBackoff);
      });
    });
    proc.once("error", (error) => log.error("could not start", { error }));
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
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        proc.kill("SIGTERM");
        const killer = setTimeout(() => {
          log.warn("did not stop in time; killing", { pid: proc.pid });
          proc.kill("SIGKILL");
        }, options.stopTimeoutMs ?? 20_000);
        await exited;
        clearTimeout(killer);
      }
      await new Promise<void>((resolve) => (file ? file.end(resolve) : resolve()));
    },
  };
}
