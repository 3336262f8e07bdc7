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
 * Whether `pid` runs: alive and not a zombie (state Z or X in /proc/<pid>/stat), which `kill(pid, 0)` still finds
 * until its parent reaps it (a container whose first process reaps nothing keeps it for ever). Where /proc cannot be
 * read, processAlive's answer.
 */
export function processRunning(pid: number): boolean {
  if (!processAlive(pid)) return false;
  const state = statFields(pid)?.[0];
  return state !== "Z" && state !== "X";
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
 * The fields of Linux's /proc/<pid>/stat after the command name (its field 3 first: the state), which is in
 * parentheses and may hold spaces; undefined where it cannot be read (no /proc, or the process has gone).
 */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** The pids of every live process, from Linux's /proc; undefined where there is none (not Linux). */
export function processIds(): number[] | undefined {
  try {
    return readdirSync("/proc").flatMap((entry) => (/^\d+$/.test(entry) ? [Number(entry)] : []));
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
  const start = statFields(pid)?.[19];
  return start ? `${pid} ${start}` : String(pid);
}

/**
 * What a record written with processIdentity (`<pid> <start>`, or an older `<pid>`) says: `pid` 0 when it holds no
 * pid (empty, cut short, garbled); `alive` while that very process runs, false once it has exited or its pid belongs
 * to a process started since (another start time: a reboot, a container started again). A record without a start
 * time, or a process whose start time cannot be read now (no /proc), is believed by its pid.
 */
export function recordedProcess(record: string | undefined): { pid: number; alive: boolean } {
  const match = /^(\d+)(?: (\d+))?$/.exec((record ?? "").trim());
  const pid = match ? Number(match[1]) : 0;
  if (!Number.isSafeInteger(pid) || pid <= 0) return { pid: 0, alive: false };
  if (!processAlive(pid)) return { pid, alive: false };
  const now = processIdentity(pid);
  return { pid, alive: match![2] === undefined || now === String(pid) || now === `${pid} ${match![2]}` };
}

/**
 * The pids whose parent is `pid` (a postmaster's backends, a supervisor's children), from Linux's /proc/<n>/stat
 * (field 4); none where /proc cannot be read.
 */
export function childrenOf(pid: number): number[] {
  return (processIds() ?? []).filter((child) => Number(statFields(child)?.[1]) === pid);
}

/** Whether `pid` leads a process group of its own (spawned `detached`): its group can then be signalled whole. */
export function leadsProcessGroup(pid: number): boolean {
  return Number(statFields(pid)?.[2]) === pid;
}
