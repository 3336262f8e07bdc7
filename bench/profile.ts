import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * Reading `node --cpu-prof` profiles (V8's .cpuprofile JSON): the functions with the most self time, and the self
 * time by where the code lives (this project's files, each package under node_modules, Node's own internals, the
 * garbage collector, idle). Written beside the profiles in the run's results folder, so `docs/performance.md` can
 * name the top items; open the .cpuprofile in Chrome DevTools for the call trees.
 */

type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
};
type CpuProfile = { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number };

export type ProfileSummary = {
  file: string;
  /** Sampled time, ms (idle included). */
  totalMs: number;
  /** Sampled time not idle, ms. */
  busyMs: number;
  /** Self time by function, ms, highest first. */
  topFunctions: { name: string; where: string; selfMs: number; share: number }[];
  /** Self time by origin (project file, package, node internals, gc), ms, highest first. */
  byOrigin: { origin: string; selfMs: number; share: number }[];
};

/** Where a frame's code lives: `next`, `postgres`, `viem`, ... for packages; `project:lib/http` for ours. */
function originOf(url: string, functionName: string, root: string): string {
  if (functionName === "(garbage collector)") return "(garbage collector)";
  if (functionName === "(idle)" || functionName === "(program)" || functionName === "(root)") return functionName;
  if (!url) return "(native / V8)";
  if (url.startsWith("node:")) return "node internals";
  const file = url.replace(/^file:\/\//, "");
  const nm = file.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = file.slice(nm + "/node_modules/".length).split("/");
    const pkg = rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
    // Next's compiled server bundles route handlers and our own modules into .next/server chunks.
    return pkg;
  }
  const rel = path.relative(root, file);
  if (rel.startsWith(".next/server/chunks") || rel.startsWith(".next/server/app")) return "project (.next bundles)";
  if (rel.startsWith("..")) return file;
  const parts = rel.split(path.sep);
  return `project:${parts.length > 1 ? parts.slice(0, Math.min(2, parts.length - 1)).join("/") : rel}`;
}

/**
 * `fromMs`: samples earlier than this many ms after the profile began are left out (the process's start-up:
 * module loading and compilation, which is not what a request costs).
 */
export function summariseProfile(file: string, root: string, top = 25, fromMs = 0): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let at = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    at += profile.timeDeltas[i] ?? 0;
    if (at < fromMs * 1000) continue;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const functions = new Map<string, { name: string; where: string; us: number }>();
  const origins = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const node = byId.get(id);
    if (!node) continue;
    total += us;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === "(idle)") {
      idle += us;
      continue;
    }
    const origin = originOf(url, functionName, root);
    origins.set(origin, (origins.get(origin) ?? 0) + us);
    const where = url ? `${path.relative(root, url.replace(/^file:\/\//, ""))}:${lineNumber + 1}` : "";
    const key = `${functionName}|${where}`;
    const f = functions.get(key) ?? { name: functionName || "(anonymous)", where, us: 0 };
    f.us += us;
    functions.set(key, f);
  }
  const busy = total - idle;
  const ms = (us: number) => Math.round(us / 100) / 10;
  const share = (us: number) => Math.round((us / Math.max(1, busy)) * 1000) / 10;
  return {
    file,
    totalMs: ms(total),
    busyMs: ms(busy),
    topFunctions: [...functions.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({ name: f.name, where: f.where, selfMs: ms(f.us), share: share(f.us) })),
    byOrigin: [...origins.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([origin, us]) => ({ origin, selfMs: ms(us), share: share(us) })),
  };
}

/**
 * The main thread's .cpuprofile in `dir`, summarised (file names end `.<pid>.<thread>.<sequence>.cpuprofile`; thread
 * 0 is the main thread, the others are tsx's module-loader thread, busy only at start-up).
 */
export function summariseProfiles(dir: string, root: string, top = 25, fromMs = 0): ProfileSummary[] {
  let files: string[] = [];
  try {
    files = readdirSync(dir).filter((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  } catch {
    return [];
  }
  return files.map((f) => summariseProfile(path.join(dir, f), root, top, fromMs));
}

export function renderProfileSummary(s: ProfileSummary, label: string, rows = 15): string {
  const lines = [
    `#### ${label}: ${path.basename(s.file)} (${s.busyMs} ms busy of ${s.totalMs} ms sampled)`,
    "",
    "| Self time by origin | ms | share of busy |",
    "|---|---:|---:|",
    ...s.byOrigin.slice(0, 10).map((o) => `| ${o.origin} | ${o.selfMs} | ${o.share}% |`),
    "",
    "| Function (self time) | where | ms | share of busy |",
    "|---|---|---:|---:|",
    ...s.topFunctions.slice(0, rows).map((f) => `| \`${f.name}\` | ${f.where} | ${f.selfMs} | ${f.share}% |`),
    "",
  ];
  return lines.join("\n");
}

// `npx tsx bench/profile.ts <dir-or-file> [root]`: print the summary of profiles written earlier.
if (process.argv[1] && import.meta.filename === path.resolve(process.argv[1])) {
  const target = process.argv[2] ?? ".";
  const root = process.argv[3] ?? path.resolve(import.meta.dirname, "..");
  const summaries = target.endsWith(".cpuprofile") ? [summariseProfile(target, root)] : summariseProfiles(target, root);
  for (const s of summaries) process.stdout.write(renderProfileSummary(s, "profile") + "\n");
}
