import type { Config } from "./config";

/**
 * The web server and the worker run under `npm start` in process groups of their own (so Ctrl-C reaches only the
 * supervisor, which stops them in order). If the supervisor dies without stopping them (SIGKILL), nothing else
 * would: each child checks that its parent is still the supervisor and, once it is not, stops itself the way a
 * SIGTERM would. Outside `npm start` (SUPERVISOR_PID unset) this does nothing.
 */
export function stopWhenSupervisorGone(config: Config, intervalMs = 1000): void {
  const supervisor = config.supervisorPid;
  if (supervisor === undefined) return;
  // Our stdout and stderr are pipes to the supervisor: once it is gone, a log line fails with EPIPE. Unhandled,
  // that error is reported on stderr, which fails the same way, over and over (a process spinning at 100% CPU,
  // seen here). The lines have nowhere to go: drop them, and stop as below.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") throw error;
    });
  }
  const timer = setInterval(() => {
    if (process.ppid !== supervisor) {
      clearInterval(timer);
      process.kill(process.pid, "SIGTERM");
    }
  }, intervalMs);
  timer.unref();
}
