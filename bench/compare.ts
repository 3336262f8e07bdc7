import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import path from "node:path";
import postgres from "postgres";
import { freePort } from "@/test/ports";
import { registerWallet, requestSponsorship } from "./api";
import { cpuBetween, snapshotCpu } from "./cpu";
import { clientsBurst } from "./end-to-end";
import { runEndpoint, standardEndpoints, type Endpoint, type HttpResult } from "./http";
import { rejectOpenRequests } from "./http-data";
import { measurePipeline, type PipelineResult } from "./pipeline";
import { renderProfileSummary, summariseProfiles, type ProfileSummary } from "./profile";
import { seedFreshWallets } from "./seed";
import { healthy, spawnInstance, startStack, type Stack } from "./stack";
import { mapConcurrent, median, note, randomAddress, round, waitFor, type Address } from "./util";

/**
 * Trees side by side (`BENCH_PHASES=compare`, `BENCH_COMPARE_ROOTS=/path/to/old[,/path/to/other]`): a whole stack
 * from this checkout and one from each other checkout (e.g. `git worktree add ../wt-old c125ea0` with node_modules
 * hard-linked), all up at once, the same endpoints measured on each in interleaved rounds whose order turns
 * every round (A B C, C B A, ...), so the machine's drift falls on every tree alike: the two GETs and the two POSTs
 * (registration of a fresh wallet; creation for a wallet registered beforehand, in the database, by the same SQL for
 * every tree), then a pipeline burst of `pipelineRequests` requests per tree and round (registered, requested 64 at
 * a time, relayed and confirmed by the tree's own worker at 1-s blocks). The figures to compare are the ratios
 * within this one run, and each tree's CPU per request. With BENCH_PROFILE=1, one more web server of each tree runs
 * under `node --cpu-prof` for one more round of GET /health, and its profile is summarised.
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
  /** Pipeline bursts, one per tree and round, in the same turning order. */
  pipeline?: { tree: string; runs: PipelineResult[] }[];
  /** End-to-end bursts (32 clients, each registers a fresh wallet then requests it), one per tree and round. */
  endToEnd?: { tree: string; runs: EndToEndRun[] }[];
  /** What stopped the bursts, if anything did (the HTTP figures are kept). */
  burstError?: string;
};

export type EndToEndRun = { requests: number; completedPerSecond: number; p50Ms: number; completed: number; cpuMsPerCompleted: Record<string, number> };

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

/** The bench's own endpoints (bench/http.ts), the four compared: the two GETs and the two POSTs. */
const COMPARED = new Set(["health", "sponsorship-by-id", "register", "sponsorship-request"]);
function endpointsFor(ids: readonly string[], freshRegistered: readonly string[]): Endpoint[] {
  return standardEndpoints({ requestIds: ids, historyWallets: [], freshRegisteredWallets: freshRegistered }).filter((e) => COMPARED.has(e.name));
}

/** Wallets registered straight in a tree's database (the wallets table is the same in every compared tree). */
async function registeredWallets(stack: Stack, count: number): Promise<string[]> {
  const sql = postgres(stack.databaseUrl!, { max: 1, onnotice: () => {} });
  try {
    return await seedFreshWallets(sql, count, "cf");
  } finally {
    await sql.end({ timeout: 5 });
  }
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
  /** The HTTP rounds of the four endpoints (false: the bursts alone). */
  http: boolean;
  /** Requests per pipeline burst (0: no pipeline part). */
  pipelineRequests: number;
  /** Sponsorships per end-to-end burst (0: no end-to-end part); each tree warms up with 300 first. */
  endToEndRequests: number;
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
    // Enough for every round of creation at well above the rate this machine reaches (about 700/s when quiet).
    const freshCount = options.http ? (options.rounds + 2) * (options.seconds + 1) * 1500 : 0;
    const fresh: string[][] = [];
    for (const s of stacks) fresh.push(await registeredWallets(s, freshCount));
    const endpoints = stacks.map((_, i) => endpointsFor(ids[i]!, fresh[i]!));
    const opts = { connections: options.connections, seconds: options.seconds };
    if (options.http)
      for (const [i, s] of stacks.entries()) for (const e of endpoints[i]!) await runEndpoint(s.url, e, { ...opts, seconds: 3, warmupSeconds: 0 });
    const runs = endpoints[0]!.map(() => stacks.map(() => [] as HttpResult[]));
    for (let r = 0; r < (options.http ? options.rounds : 0); r++) {
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
      endpoints: (options.http ? endpoints[0]! : []).map((e, k) => ({
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
    try {
      await bursts(result);
    } catch (error) {
      // The HTTP rounds' figures stand on their own: kept, with what stopped the bursts.
      note(`compare: the bursts failed: ${String(error)}`);
      result.burstError = String(error);
    }
    return result;
  } finally {
    for (const s of stacks.splice(0)) await s.stop().catch((e: unknown) => note(`stopping ${s.name}: ${String(e)}`));
  }

  async function bursts(result: TreeComparison): Promise<void> {
    // What the HTTP rounds created stays out of the bursts: rejected before the workers run again.
    for (const s of stacks) note(`compare: ${await rejectOpenRequests(s.databaseUrl!)} open requests of "${s.name}" rejected`);
    for (const s of stacks) s.resumeWorker();
    if (options.pipelineRequests > 0) {
      result.pipeline = stacks.map((_, i) => ({ tree: names[i]!, runs: [] }));
      for (let r = 0; r < options.rounds; r++) {
        const order = stacks.map((_, i) => i);
        if (r % 2 === 1) order.reverse();
        for (const i of order) {
          const s = stacks[i]!;
          result.pipeline[i]!.runs.push(
            await measurePipeline({
              baseUrls: [s.url],
              databaseUrl: s.databaseUrl!,
              rpcUrl: s.rpcUrl!,
              treasury: s.treasuryAddress!,
              requests: options.pipelineRequests,
              mode: "burst",
              concurrency: 64,
              cpu: s.cpu,
            }),
          );
        }
      }
    }
    if (options.endToEndRequests > 0) {
      result.endToEnd = stacks.map((_, i) => ({ tree: names[i]!, runs: [] }));
      const sqls = stacks.map((s) => postgres(s.databaseUrl!, { max: 2, onnotice: () => {} }));
      try {
        // Warm: a service runs for days; the first requests of a process pay for loading modules and the JIT.
        for (const [i, s] of stacks.entries()) await clientsBurst(s.url, sqls[i]!, 300, 32);
        for (let r = 0; r < options.rounds; r++) {
          const order = stacks.map((_, i) => i);
          if (r % 2 === 1) order.reverse();
          for (const i of order) {
            const s = stacks[i]!;
            const before = snapshotCpu(s.cpu!);
            const t0 = Date.now();
            const ids = await clientsBurst(s.url, sqls[i]!, options.endToEndRequests, 32);
            const cpu = cpuBetween(before, s.cpu!);
            const rows = await sqls[i]!<{ status: string; requested_at: Date; completed_at: Date | null }[]>`
              SELECT status, requested_at, completed_at FROM sponsorship_requests WHERE id = ANY(${ids}::uuid[])`;
            const done = rows.filter((row) => row.status === "completed" && row.completed_at);
            const last = Math.max(...done.map((row) => row.completed_at!.getTime()));
            const latencies = done.map((row) => row.completed_at!.getTime() - row.requested_at.getTime());
            result.endToEnd[i]!.runs.push({
              requests: ids.length,
              completed: done.length,
              completedPerSecond: round(done.length / ((last - t0) / 1000), 1),
              p50Ms: latencies.length > 0 ? median(latencies) : NaN,
              cpuMsPerCompleted: Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, round(v / Math.max(1, done.length), 2)])),
            });
            note(`compare: end to end on "${names[i]}": ${result.endToEnd[i]!.runs.at(-1)!.completedPerSecond}/s`);
          }
        }
      } finally {
        for (const sql of sqls) await sql.end({ timeout: 5 });
      }
    }
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

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
  if (c.burstError) lines.push(`The bursts stopped: ${c.burstError}`, "");
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
  if (c.pipeline?.length) {
    const cpuOf = (t: { runs: PipelineResult[] }, k: string) => mean(t.runs.map((r) => r.cpuMsPerRequest?.[k] ?? NaN));
    const base = c.pipeline[0]!;
    const baseRate = mean(base.runs.map((r) => r.completedPerSecond));
    const baseCpu = ["web", "worker", "postgres", "anvil"].reduce((a, k) => a + cpuOf(base, k), 0);
    lines.push(
      `Pipeline bursts (${c.pipeline[0]!.runs[0]?.requests ?? "?"} requests, 64 in flight, 1-s blocks), one per tree and round:`,
      "",
      "| Tree | completed/s per round | mean | vs this tree | p50 ms (mean) | CPU ms per request: web / worker / PostgreSQL / anvil | sum, vs this tree | paid twice |",
      "|---|---|---:|---:|---:|---|---|---:|",
      ...c.pipeline.map((t) => {
        const rate = mean(t.runs.map((r) => r.completedPerSecond));
        const cpu = ["web", "worker", "postgres", "anvil"].map((k) => cpuOf(t, k));
        const sum = cpu.reduce((a, b) => a + b, 0);
        return `| ${t.tree} | ${t.runs.map((r) => round(r.completedPerSecond, 0)).join(", ")} | ${round(rate, 1)} | ${round((rate / baseRate) * 100, 1)}% | ${round(
          mean(t.runs.map((r) => r.latencyMs.p50)),
          0,
        )} | ${cpu.map((v) => round(v, 2)).join(" / ")} | ${round(sum, 2)}, ${round((sum / baseCpu) * 100, 1)}% | ${t.runs.reduce((a, r) => a + r.onChain.walletsPaidTwice, 0)} |`;
      }),
      "",
    );
  }
  if (c.endToEnd?.length) {
    const parts = ["web", "worker", "postgres", "anvil"];
    const cpuOf = (t: { runs: EndToEndRun[] }, k: string) => mean(t.runs.map((r) => r.cpuMsPerCompleted[k] ?? NaN));
    const base = c.endToEnd[0]!;
    const baseRate = mean(base.runs.map((r) => r.completedPerSecond));
    const baseSum = parts.reduce((a, k) => a + cpuOf(base, k), 0);
    lines.push(
      `End-to-end bursts (${base.runs[0]?.requests ?? "?"} sponsorships, 32 clients each registering then requesting, 1-s blocks, after 300 to warm up), one per tree and round:`,
      "",
      "| Tree | completed/s per round | mean | vs this tree | p50 ms (mean) | CPU ms per sponsorship: web / worker / PostgreSQL / anvil | sum, vs this tree | load generator |",
      "|---|---|---:|---:|---:|---|---|---:|",
      ...c.endToEnd.map((t) => {
        const rate = mean(t.runs.map((r) => r.completedPerSecond));
        const cpu = parts.map((k) => cpuOf(t, k));
        const sum = cpu.reduce((a, b) => a + b, 0);
        return `| ${t.tree} | ${t.runs.map((r) => r.completedPerSecond).join(", ")} | ${round(rate, 1)} | ${round((rate / baseRate) * 100, 1)}% | ${round(
          mean(t.runs.map((r) => r.p50Ms)),
          0,
        )} | ${cpu.map((v) => round(v, 2)).join(" / ")} | ${round(sum, 2)}, ${round((sum / baseSum) * 100, 1)}% | ${round(cpuOf(t, "bench"), 2)} |`;
      }),
      "",
    );
  }
  for (const p of c.profiles ?? []) lines.push(renderProfileSummary(p.summary, `web server of ${p.tree}`));
  return lines.join("\n");
}
