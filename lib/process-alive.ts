import { readdirSync, readFileSync } from "node:fs";

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

/**
 * A process as a lock or pid file can record it: its pid and its start time (field 22 of /proc/<pid>/stat, in clock
 * ticks since boot), so a pid given to another process since (a container started again, a reboot) is not taken for
 * the one recorded. Where /proc cannot be read (not Linux) the pid alone.
 */
export function processIdentity(pid: number): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const start = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    return start ? `${pid} ${start}` : String(pid);
  } catch {
    return String(pid);
  }
}

/**
 * The pids whose parent is `pid` (a postmaster's backends, a supervisor's children), from Linux's /proc/<n>/stat
 * (field 4); none where /proc cannot be read.
 */
export function childrenOf(pid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  const children: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

/** Whether `pid` leads a process group of its own (spawned `detached`): its group can then be signalled whole. */
export function leadsProcessGroup(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]) === pid;
  } catch {
    return false;
  }
}
