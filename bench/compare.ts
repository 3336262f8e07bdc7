import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import postgres from "postgres";
import { freePort } from "@/test/ports";
import { registerWallet, requestSponsorship } from "./api";
import { runEndpoint, type Endpoint, type HttpResult } from "./http";
import { renderProfileSummary, summariseProfiles, type ProfileSummary } from "./profile";
import { healthy, spawnInstance, startStack, type Stack } from "./stack";
import { mapConcurrent, note, randomAddress, round, waitFor, type Address } from "./util";

/**
 * Trees side by side (`BENCH_PHASES=compare`, `BENCH_COMPARE_ROOTS=/path/to/old[,/path/to/other]`): a whole stack
 * from this checkout and one from each other checkout (e.g. `git worktree add ../wt-old c125ea0` with node_modules
 * hard-linked), all up at once, the same GET endpoints measured on each in interleaved rounds whose order turns
 * every round (A B C, C B A, ...), so the machine's drift falls on every tree alike. The figures to compare are the
 * ratios within this one run, and each tree's web-server CPU per request. With BENCH_PROFILE=1, one more web server
 * of each tree runs under `node --cpu-prof` for one more round of each endpoint, and its profile is summarised.
 */

export type TreeFigures = {
  tree: string;
  commit: string;
  reqPerSec: number;
  rounds: number[];
  cpuMsPerRequest: Record<string, number>;
  statusCounts: Record<string, number>;
};
export type CompareEndpoint = { name: string; path: string; trees: TreeFigures[] };
export type TreeComparison = {
  trees: { name: string; root: string; commit: string }[];
  endpoints: CompareEndpoint[];
  /**
   * Each tree's profiled web server under GET /health: its CPU per request from /proc (the profiler's cost
   * included, alike for every tree), and the profile's summary. (The profile's own "busy" time is wall-clock
   * sampling: on a loaded machine it counts time the process waited for a core.)
   */
  profiles?: { tree: string; requests: number; cpuMsPerRequest: number; summary: ProfileSummary }[];
};

function commitOf(root: string): string {
  try {
    const head = execFileSync("git", ["-C", root, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync("git", ["-C", root, "status", "--porcelain", "--untracked-files=no"], { encoding: "utf8" }).trim();
    return dirty ? `${head}+changes` : head;
  } catch {
    return "?";
  }
}

/** A few requests through the tree's own API (schema-independent), relayed by its worker: what GET by id reads. */
async function seedThroughApi(stack: Stack, count: number): Promise<string[]> {
  const wallets = Array.from({ length: count }, () => randomAddress() as Address);
  const ids: string[] = [];
  await mapConcurrent(wallets, 16, async (w) => {
    await registerWallet(stack.url, w);
    ids.push(await requestSponsorship(stack.url, w));
  });
  const sql = postgres(stack.databaseUrl!, { max: 1, onnotice: () => {} });
  try {
    await waitFor(
      `the ${count} seeded requests of "${stack.name}" to complete`,
      async () => {
        const [r] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM sponsorship_requests WHERE status = 'completed'`;
        return (r?.n ?? 0) >= count ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  } finally {
    await sql.end({ timeout: 5 });
  }
  return ids;
}

function endpointsFor(ids: readonly string[]): Endpoint[] {
  return [
    { name: "health", method: "GET", path: "/health", next: () => ({ path: "/health" }) },
    { name: "sponsorship-by-id", method: "GET", path: "/sponsorship/:id", next: (n) => ({ path: `/sponsorship/${ids[(n * 7919) % ids.length]}` }) },
  ];
}

function combine(runs: HttpResult[]): Omit<TreeFigures, "tree" | "commit"> {
  const requests = runs.reduce((a, r) => a + r.requests, 0);
  const seconds = runs.reduce((a, r) => a + r.seconds, 0);
  const cpu: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.cpuMsPerRequest ?? {})) cpu[k] = (cpu[k] ?? 0) + (v * r.requests) / requests;
  const statusCounts: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.statusCounts)) statusCounts[k] = (statusCounts[k] ?? 0) + v;
  return {
    reqPerSec: round(requests / seconds, 0),
    rounds: runs.map((r) => r.reqPerSec),
    cpuMsPerRequest: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, round(v, 3)])),
    statusCounts,
  };
}

export async function compareTrees(options: {
  otherRoots: readonly string[];
  thisRoot: string;
  logDir: string;
  seconds: number;
  rounds: number;
  connections: number;
  profile: boolean;
}): Promise<TreeComparison> {
  const roots = [options.thisRoot, ...options.otherRoots];
  const names = roots.map((r, i) => (i === 0 ? "this" : path.basename(r)));
  const stacks: Stack[] = [];
  try {
    // One after the other: a first start may build the Next.js app of its tree.
    for (const [i, root] of roots.entries()) stacks.push(await startStack({ name: `tree-${names[i]}`, blockTime: 1, logDir: options.logDir, root }));
    const ids: string[][] = [];
    for (const s of stacks) ids.push(await seedThroughApi(s, 200));
    for (const s of stacks) s.pauseWorker();
    const endpoints = stacks.map((_, i) => endpointsFor(ids[i]!));
    const opts = { connections: options.connections, seconds: options.seconds };
    for (const [i, s] of stacks.entries()) for (const e of endpoints[i]!) await runEndpoint(s.url, e, { ...opts, seconds: 3, warmupSeconds: 0 });
    const runs = endpoints[0]!.map(() => stacks.map(() => [] as HttpResult[]));
    for (let r = 0; r < options.rounds; r++) {
      for (const [k] of endpoints[0]!.entries()) {
        const order = stacks.map((_, i) => i);
        if (r % 2 === 1) order.reverse();
        for (const i of order) {
          runs[k]![i]!.push(await runEndpoint(stacks[i]!.url, endpoints[i]![k]!, { ...opts, warmupSeconds: 1, cpu: stacks[i]!.cpu }));
        }
      }
    }
    const commits = roots.map(commitOf);
    const result: TreeComparison = {
      trees: roots.map((root, i) => ({ name: names[i]!, root, commit: commits[i]! })),
      endpoints: endpoints[0]!.map((e, k) => ({
        name: e.name,
        path: e.path,
        trees: stacks.map((_, i) => ({ tree: names[i]!, commit: commits[i]!, ...combine(runs[k]![i]!) })),
      })),
    };
    if (options.profile) {
      result.profiles = [];
      for (const [i, s] of stacks.entries()) {
        const dir = path.join(options.logDir, "profiles", `compare-${names[i]}-web`);
        mkdirSync(dir, { recursive: true });
        const port = await freePort();
        const spawned = Date.now();
        const web = spawnInstance(s, "web", { PORT: String(port) }, options.logDir, { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`] });
        const url = `http://127.0.0.1:${port}`;
        let loadFromMs = 0;
        let requests = 0;
        let cpuMsPerRequest = 0;
        try {
          await waitFor(`the profiled web server of "${names[i]}"`, async () => ((await healthy(url)) ? true : undefined), {
            timeoutMs: 120_000,
            intervalMs: 250,
          });
          // Warmed up first; the profile is read from the measured load on (GET /health: the floor every request pays).
          await runEndpoint(url, endpoints[i]![0]!, { ...opts, seconds: 5, warmupSeconds: 0 });
          loadFromMs = Date.now() - spawned;
          const load = await runEndpoint(url, endpoints[i]![0]!, { ...opts, seconds: 10, warmupSeconds: 0, cpu: { web: () => [web.pid] } });
          requests = load.requests;
          cpuMsPerRequest = load.cpuMsPerRequest?.web ?? 0;
          note(`profiled "${names[i]}": ${load.requests} requests of GET /health`);
        } finally {
          await web.stop();
        }
        for (const summary of summariseProfiles(dir, s.root, 25, loadFromMs)) {
          result.profiles.push({ tree: names[i]!, requests, cpuMsPerRequest, summary });
        }
      }
    }
    for (const s of stacks) s.resumeWorker();
    return result;
  } finally {
    for (const s of stacks.splice(0)) await s.stop().catch((e: unknown) => note(`stopping ${s.name}: ${String(e)}`));
  }
}

export function renderComparison(c: TreeComparison): string {
  const base = c.trees[0]!;
  const lines = [
    "## Trees side by side (one run, interleaved rounds)",
    "",
    ...c.trees.map((t) => `- **${t.name}**: ${t.commit} (${t.root})`),
    "",
    "| Endpoint | Tree | req/s | rounds | vs this tree | web CPU ms/req | PostgreSQL ms/req | statuses |",
    "|---|---|---:|---|---:|---:|---:|---|",
  ];
  for (const e of c.endpoints) {
    const mine = e.trees[0]!;
    for (const t of e.trees) {
      lines.push(
        `| ${e.path} | ${t.tree} (${t.commit}) | ${t.reqPerSec} | ${t.rounds.join(", ")} | ${Math.round((t.reqPerSec / mine.reqPerSec) * 1000) / 10}% | ${t.cpuMsPerRequest.web ?? "?"} | ${t.cpuMsPerRequest.postgres ?? "?"} | ${Object.entries(
          t.statusCounts,
        )
          .map(([k, v]) => `${k}: ${v}`)
          .join(", ")} |`,
      );
    }
  }
  lines.push("", `Ratios are against ${base.name} (${base.commit}).`, "");
  if (c.profiles?.length) {
    lines.push(
      "Under `node --cpu-prof`, GET /health for 10 s after a 5-s warm-up (the profiler's own cost included, alike for every tree):",
      "",
      "| Tree | requests | web CPU ms per request (/proc) | vs this tree |",
      "|---|---:|---:|---:|",
      ...c.profiles.map(
        (p) => `| ${p.tree} | ${p.requests} | ${p.cpuMsPerRequest} | ${Math.round((p.cpuMsPerRequest / c.profiles![0]!.cpuMsPerRequest) * 1000) / 10}% |`,
      ),
      "",
    );
  }
  for (const p of c.profiles ?? []) lines.push(renderProfileSummary(p.summary, `web server of ${p.tree}`));
  return lines.join("\n");
}
