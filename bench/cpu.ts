import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * Where the CPU goes: CPU time (user + system, from /proc) consumed by each part of the stack during a
 * measurement, so a figure comes with what bounds it (the web server, PostgreSQL, anvil, the worker, or the
 * load generator itself). Linux only; elsewhere the groups read as empty.
 */

export const TICK_MS = 10; // CLK_TCK is 100 on Linux

export type CpuGroups = Record<string, () => number[]>;
export type CpuSnapshot = Map<string, Map<number, number>>;

/** A pid whose reaped children count too (the postmaster: backends and autovacuum workers that came and went). */
type WithChildren = number;
const reapedToo = new Set<WithChildren>();

/** utime, stime, cutime, cstime of /proc/<pid>/stat (fields 14-17 of the full line), or undefined once it is gone. */
function statTicks(pid: number): { user: number; system: number; reaped: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { user: Number(fields[11]), system: Number(fields[12]), reaped: Number(fields[13]) + Number(fields[14]) };
  } catch {
    return undefined;
  }
}

function ticks(pid: number): number | undefined {
  const t = statTicks(pid);
  return t && t.user + t.system + (reapedToo.has(pid) ? t.reaped : 0);
}

/**
 * A process's CPU ticks (user + system; `reaped`: with its children waited for; `only: "system"`: system time
 * alone), 0 once it is gone. For the probes that read one process at a time (bench/worker-cpu.ts, bench/statements.ts).
 */
export function processTicks(pid: number, options: { reaped?: boolean; only?: "system" } = {}): number {
  const t = statTicks(pid);
  if (!t) return 0;
  if (options.only === "system") return t.system;
  return t.user + t.system + (options.reaped ? t.reaped : 0);
}

/** A PostgreSQL cluster's CPU ticks: the postmaster with its reaped children, and every live child. */
export function clusterTicks(postmaster: number): number {
  return processTicks(postmaster, { reaped: true }) + childrenOf(postmaster).reduce((sum, pid) => sum + processTicks(pid, { reaped: true }), 0);
}

/** A process's time on a CPU in ms, from /proc/<pid>/schedstat (nanoseconds, finer than stat's 10-ms ticks). */
export function schedCpuMs(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1e6;
}

/** Client sessions ("postgres: user db host(port) state") vs the server's own processes. */
function isPostgresSession(pid: number): boolean {
  try {
    return /^postgres: \S+ \S+ [^ ]+\(\d+\)/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " "));
  } catch {
    return false;
  }
}

/** Every process whose parent is `pid` (the PostgreSQL backends of a postmaster). */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function readPidFile(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, "utf8").split("\n")[0]?.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** The stack's process groups, from its DATA_DIR and process file. */
export function stackCpuGroups(dataDir: string, pids: () => Record<string, number>): CpuGroups {
  const postmaster = () => readPidFile(path.join(dataDir, "postgres", "postmaster.pid"));
  return {
    web: () => [pids().web].filter((p): p is number => p !== undefined),
    worker: () => [pids().worker].filter((p): p is number => p !== undefined),
    // Sessions (the connections' backends) apart from the server's own work (postmaster, WAL writer, checkpointer,
    // autovacuum, I/O workers, and every child that exited meanwhile, through the postmaster's reaped-children time).
    postgres: () => {
      const pm = postmaster();
      return pm ? childrenOf(pm).filter(isPostgresSession) : [];
    },
    "postgres (server)": () => {
      const pm = postmaster();
      if (!pm) return [];
      reapedToo.add(pm);
      return [pm, ...childrenOf(pm).filter((pid) => !isPostgresSession(pid))];
    },
    anvil: () => [readPidFile(path.join(dataDir, "anvil", "anvil.pid"))].filter((p): p is number => p !== undefined),
    bench: () => [process.pid],
  };
}

export function snapshotCpu(groups: CpuGroups): CpuSnapshot {
  const snap: CpuSnapshot = new Map();
  for (const [name, list] of Object.entries(groups)) {
    const m = new Map<number, number>();
    for (const pid of list()) {
      const t = ticks(pid);
      if (t !== undefined) m.set(pid, t);
    }
    snap.set(name, m);
  }
  return snap;
}

/** CPU milliseconds per group between two snapshots (processes born in between count from zero). */
export function cpuBetween(before: CpuSnapshot, groups: CpuGroups): Record<string, number> {
  const after = snapshotCpu(groups);
  const out: Record<string, number> = {};
  for (const [name, m] of after) {
    let total = 0;
    for (const [pid, t] of m) total += t - (before.get(name)?.get(pid) ?? 0);
    out[name] = total * TICK_MS;
  }
  return out;
}

/** `groups` with extra processes added to some groups (the scale-out run's second web server and worker). */
export function withExtraPids(groups: CpuGroups, extra: Record<string, () => number[]>): CpuGroups {
  const out: CpuGroups = { ...groups };
  for (const [name, list] of Object.entries(extra)) {
    const base = groups[name];
    out[name] = () => [...(base ? base() : []), ...list()];
  }
  return out;
}
