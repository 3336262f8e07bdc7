import { readFileSync } from "node:fs";

/** Whether a process with this pid exists (signal 0 probes without signalling; EPERM means it exists as another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The command line of a live process (Linux's /proc/<pid>/cmdline, readable for any user's process), to tell whether
 * the pid in a pid file is still the process that wrote it: the file outlives a reboot or a SIGKILL, and its number
 * may since have been given to any other process. Undefined where it cannot be read (no /proc: not Linux; or the
 * process has gone); each caller then takes the side that harms no one, and says which.
 */
export function commandLineOf(pid: number): string[] | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").slice(0, -1);
  } catch {
    return undefined;
  }
}
