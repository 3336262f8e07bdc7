import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { anvilBinary } from "@/contracts/anvil";
import { closeApiConnections } from "./api";
import { measureCeiling } from "./ceiling";
import { compareTrees } from "./compare";
import { runEndToEnd } from "./end-to-end";
import { runChainMemoryPhase } from "./chain-memory";
import { timeBudgetCheck } from "./budget-check";
import { measureGrowth } from "./growth";
import { runEndpoint, runInterleaved, standardEndpoints, type HttpResult } from "./http";
import { measurePipeline } from "./pipeline";
import { evaluateTargets, renderMarkdown, type BenchReport, type BudgetResult, type ChainRun, type ScaleOutResult } from "./report";
import { seedFreshWallets } from "./seed";
import { attachStack, healthy, spawnInstance, startStack, type Stack } from "./stack";
import { note, waitFor } from "./util";
import { withExtraPids } from "./cpu";
import { freePort } from "@/test/ports";

/**
 * `npm run bench`: brings up the service (or uses BENCH_URL), measures HTTP, the pipeline at 1-s and instant
 * blocks against the chain's own ceiling, read latency as the tables grow, and two instances against one, all
 * in one run so the ratios hold on a noisy machine; prints a table and writes bench/results/.
 *
 * Settings (environment): BENCH_PHASES (default "http,budget,pipeline1,e2e,pipeline0,growth,scaleout,chainmemory"), BENCH_REQUESTS
 * (1000), BENCH_PACED_RATE (200), BENCH_SECONDS (5) x BENCH_ROUNDS (3), BENCH_CONNECTIONS (32), BENCH_BURST_CONCURRENCY
 * (256 requests in flight in the pipeline's all-at-once run), BENCH_GROWTH
 * ("1000,100000,1000000"), BENCH_CHAIN_MEMORY ("3000,30,60": sponsor calls, per second, idle seconds after them: the
 * local chain's resident memory, issue 11 item 10), BENCH_URL (+ BENCH_DATABASE_URL, BENCH_RPC_URL, BENCH_DATA_DIR)
 * for a running stack. The "compare" phase (not in the default list) runs this tree beside the checkouts in
 * BENCH_COMPARE_ROOTS (comma-separated), with BENCH_PROFILE=1 a --cpu-prof web server of each (bench/compare.ts).
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const env = process.env;
const int = (v: string | undefined, d: number) => (v && /^\d+$/.test(v) ? Number(v) : d);
const settings = {
  phases: (env.BENCH_PHASES ?? "http,budget,pipeline1,e2e,pipeline0,growth,scaleout,chainmemory").split(",").map((s) => s.trim()),
  requests: int(env.BENCH_REQUESTS, 1000),
  pacedRate: int(env.BENCH_PACED_RATE, 200),
  seconds: int(env.BENCH_SECONDS, 5),
  rounds: int(env.BENCH_ROUNDS, 3),
  connections: int(env.BENCH_CONNECTIONS, 32),
  /** Requests in flight in the pipeline's "all at once" run (the ceiling sends its 1,000 up front). */
  burstConcurrency: int(env.BENCH_BURST_CONCURRENCY, 256),
  growth: (env.BENCH_GROWTH ?? "1000,100000,1000000")
    .split(",")
    .map(Number)
    .filter((n) => n > 0),
  ceilingRelayers: int(env.BENCH_CEILING_RELAYERS, 4),
  chainMemory: (() => {
    const [transactions, rate, idleSeconds] = (env.BENCH_CHAIN_MEMORY ?? "3000,30,60").split(",").map((v) => int(v.trim(), -1));
    return { transactions: transactions! > 0 ? transactions! : 3000, rate: rate! > 0 ? rate! : 30, idleSeconds: idleSeconds! >= 0 ? idleSeconds! : 60 };
  })(),
};
const has = (phase: string) => settings.phases.includes(phase);

function version(pkg: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "?";
  }
}

function machine(): Record<string, string | number> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model ?? "?",
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
  };
}

function anvilVersion(): string {
  try {
    return execFileSync(anvilBinary(), ["--version"], { encoding: "utf8" })
      .split("\n")[0]!
      .replace(/^anvil Version:\s*/i, "")
      .trim();
  } catch {
    return "?";
  }
}

async function serverVersion(databaseUrl: string | undefined): Promise<string> {
  if (!databaseUrl) return "?";
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const [r] = await sql<{ v: string }[]>`SELECT current_setting('server_version') AS v`;
    return r?.v ?? "?";
  } finally {
    await sql.end({ timeout: 5 });
  }
}

let seedRound = 0;

/** Requests and wallets that exist, for the read endpoints; fresh registered wallets for POST /sponsorship/request. */
async function httpData(stack: Stack, seeded: number) {
  const sql = postgres(stack.databaseUrl!, { max: 1, onnotice: () => {} });
  try {
    let rows = await sql<{ id: string; wallet_address: string }[]>`
      SELECT id, wallet_address FROM sponsorship_requests ORDER BY requested_at DESC LIMIT 5000`;
    if (rows.length === 0) {
      // Nothing yet (an HTTP-only run): seed a little history, then read it.
      const { growRequests } = await import("./seed");
      await growRequests(sql, 0, 2000);
      rows = await sql<{ id: string; wallet_address: string }[]>`SELECT id, wallet_address FROM sponsorship_requests LIMIT 5000`;
    }
    // A prefix per call: wallets seeded for an earlier run already have requests.
    const fresh = await seedFreshWallets(sql, seeded, `b${(seedRound++ % 16).toString(16)}`);
    return { requestIds: rows.map((r) => r.id), historyWallets: [...new Set(rows.map((r) => r.wallet_address))], freshRegisteredWallets: fresh };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Open requests the HTTP run created (the worker was paused): rejected, so no worker relays them afterwards. */
async function rejectOpenRequests(databaseUrl: string): Promise<number> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`SET lock_timeout = '10s'`;
    const rows = await sql`
      UPDATE sponsorship_requests SET status = 'rejected', rejected_at = now(), status_actor = 'bench',
        status_reason = 'bench: created by the HTTP measurement, not to be relayed'
      WHERE id IN (SELECT id FROM sponsorship_requests WHERE status = 'pending' FOR UPDATE SKIP LOCKED)
      RETURNING id`;
    return rows.length;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function runHttpSuite(stack: Stack, resultsNote: string[]): Promise<HttpResult[]> {
  const data = stack.databaseUrl
    ? await httpData(stack, Math.max(50_000, settings.seconds * settings.rounds * 3000))
    : { requestIds: [], historyWallets: [], freshRegisteredWallets: [] };
  const endpoints = standardEndpoints(data).filter((e) => {
    if (e.name === "sponsorship-by-id" || e.name === "wallet-history") return data.requestIds.length > 0;
    if (e.name === "sponsorship-request") return data.freshRegisteredWallets.length > 0;
    return true;
  });
  const results = await runInterleaved(stack.url, endpoints, {
    connections: settings.connections,
    seconds: settings.seconds,
    rounds: settings.rounds,
    cpu: stack.cpu,
  });
  const health = results[0]!.reqPerSec;
  resultsNote.push(
    `HTTP: ${settings.rounds} interleaved rounds of ${settings.seconds} s per endpoint, ${settings.connections} connections; req/s per round of GET /health: ${results[0]!.rounds?.join(", ")}.`,
  );
  for (const r of results) r.ratioToHealth = r.reqPerSec / health;
  return results;
}

/**
 * The global budget's cost (issue 10): POST /sponsorship/request on the stack's web server (no budget) and on a
 * second web server of the same stack with a budget set far above what the run creates (every answer still a 201),
 * in interleaved rounds, one instance at a time, workers paused. The budget must not serialise creations, so the
 * two rates should be within noise of each other.
 */
async function runBudget(stack: Stack, logDir: string): Promise<BudgetResult> {
  const port = await freePort();
  note(`budget: a second web server on ${port} with SPONSOR_BUDGET_PER_HOUR and _PER_DAY set`);
  const web = spawnInstance(stack, "web", { PORT: String(port), SPONSOR_BUDGET_PER_HOUR: "1000000000", SPONSOR_BUDGET_PER_DAY: "1000000000" }, logDir);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor("the budgeted web server", async () => ((await healthy(url)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    stack.pauseWorker();
    // Two chunks of wallets more than the rounds use: both servers are warmed up first (a cold one loses its first
    // round to the JIT, not to the budget; the stack's own server is cold when the HTTP phase did not run).
    const data = await httpData(stack, (settings.rounds * 2 + 2) * Math.max(15_000, settings.seconds * 3000));
    const chunk = Math.floor(data.freshRegisteredWallets.length / (settings.rounds * 2 + 2));
    const post = (round: number, k: number) =>
      standardEndpoints({ ...data, freshRegisteredWallets: data.freshRegisteredWallets.slice((round * 2 + k) * chunk, (round * 2 + k + 1) * chunk) }).find(
        (e) => e.name === "sponsorship-request",
      )!;
    for (const [k, base] of [stack.url, url].entries()) {
      await runEndpoint(base, post(settings.rounds, k), { connections: settings.connections, seconds: settings.seconds, warmupSeconds: 3 });
    }
    const without: number[] = [];
    const withBudget: number[] = [];
    // CPU per created request of the serving web server and PostgreSQL's sessions (workers paused: they are all
    // the round's work), less sensitive than the rate to what else the machine runs.
    const cpuWithout: number[] = [];
    const cpuWith: number[] = [];
    const groups = (pid: () => number[]) => ({ web: pid, postgres: stack.cpu!.postgres! });
    const cpuOf = (r: { cpuMsPerRequest?: Record<string, number> }) => (r.cpuMsPerRequest?.web ?? NaN) + (r.cpuMsPerRequest?.postgres ?? NaN);
    for (let round = 0; round < settings.rounds; round++) {
      // Alternate which goes first, so a drift of the machine's load falls on both alike.
      const order: [string, number[], number[], number, () => number[]][] =
        round % 2 === 0
          ? [
              [stack.url, without, cpuWithout, 0, stack.cpu!.web!],
              [url, withBudget, cpuWith, 1, () => [web.pid]],
            ]
          : [
              [url, withBudget, cpuWith, 1, () => [web.pid]],
              [stack.url, without, cpuWithout, 0, stack.cpu!.web!],
            ];
      for (const [base, into, cpuInto, k, pid] of order) {
        const r = await runEndpoint(base, post(round, k), { connections: settings.connections, seconds: settings.seconds, warmupSeconds: 1, cpu: groups(pid) });
        into.push(r.reqPerSec);
        cpuInto.push(cpuOf(r));
      }
    }
    await rejectOpenRequests(stack.databaseUrl!);
    stack.resumeWorker();
    const checkMicros = await timeBudgetCheck(stack.databaseUrl!);
    note(`budget: the check costs ${checkMicros.check.toFixed(0)} µs in the database with a full day counted (SELECT 1: ${checkMicros.select1.toFixed(0)} µs)`);
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    return {
      checkMicros,
      withoutPerSec: mean(without),
      withPerSec: mean(withBudget),
      ratio: mean(withBudget) / mean(without),
      rounds: { without, with: withBudget },
      cpuMsPerRequest: { without: mean(cpuWithout), with: mean(cpuWith), rounds: { without: cpuWithout, with: cpuWith } },
    };
  } finally {
    await web.stop();
  }
}

async function runChain(stack: Stack, blockTime: number): Promise<ChainRun> {
  const run: ChainRun = { blockTime };
  run.ceiling = await measureCeiling({
    rpcUrl: stack.rpcUrl!,
    chainId: stack.chainId!,
    treasury: stack.treasuryAddress!,
    transactions: settings.requests,
    relayers: settings.ceilingRelayers,
  });
  note(`ceiling at ${blockTime}-s blocks: ${Math.round(run.ceiling.perSecond)}/s`);
  const common = {
    baseUrls: [stack.url],
    databaseUrl: stack.databaseUrl!,
    rpcUrl: stack.rpcUrl!,
    treasury: stack.treasuryAddress!,
    requests: settings.requests,
    cpu: stack.cpu,
  };
  run.burst = await measurePipeline({ ...common, mode: "burst", concurrency: settings.burstConcurrency });
  note(`pipeline burst at ${blockTime}-s blocks: ${Math.round(run.burst.completedPerSecond)}/s, p50 ${Math.round(run.burst.latencyMs.p50)} ms`);
  run.paced = await measurePipeline({ ...common, mode: "paced", rate: settings.pacedRate });
  note(`pipeline paced at ${blockTime}-s blocks: ${Math.round(run.paced.completedPerSecond)}/s, p50 ${Math.round(run.paced.latencyMs.p50)} ms`);
  return run;
}

async function relayerLeases(databaseUrl: string): Promise<Record<string, number>> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ owner: string | null; n: number }[]>`
      SELECT lease_owner AS owner, count(*)::int AS n FROM relayer_accounts
      WHERE lease_expires_at > now() GROUP BY lease_owner`;
    return Object.fromEntries(rows.map((r) => [r.owner ?? "none", r.n]));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function runScaleOut(stack: Stack, logDir: string): Promise<ScaleOutResult> {
  // One web server and one worker first, measured right here so both sides see the same chain and tables.
  const common = {
    databaseUrl: stack.databaseUrl!,
    rpcUrl: stack.rpcUrl!,
    treasury: stack.treasuryAddress!,
    requests: settings.requests,
  };
  const singlePipeline = await measurePipeline({ ...common, baseUrls: [stack.url], mode: "burst", concurrency: settings.burstConcurrency, cpu: stack.cpu });

  const port2 = await freePort();
  note(`scale-out: a second web server on ${port2} and a second worker`);
  const web2 = spawnInstance(stack, "web", { PORT: String(port2) }, logDir);
  const worker2 = spawnInstance(stack, "worker", {}, logDir);
  const url2 = `http://127.0.0.1:${port2}`;
  const cpu = stack.cpu ? withExtraPids(stack.cpu, { web: () => [web2.pid], worker: () => [worker2.pid] }) : undefined;
  const bothLease = () =>
    waitFor(
      "both workers to hold relayer leases",
      async () => {
        const l = await relayerLeases(stack.databaseUrl!);
        return Object.keys(l).filter((k) => k !== "none").length >= 2 ? l : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    ).catch(async () => relayerLeases(stack.databaseUrl!));
  try {
    await waitFor("the second web server", async () => ((await healthy(url2)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    const leases = await bothLease();

    // HTTP: POST /sponsorship/request on one instance, then on both at once, in interleaved rounds (workers paused).
    stack.pauseWorker();
    process.kill(worker2.pid, "SIGSTOP");
    const data = await httpData(stack, settings.rounds * 3 * Math.max(15_000, settings.seconds * 3000));
    const post = (wallets: readonly string[]) => standardEndpoints({ ...data, freshRegisteredWallets: wallets }).find((e) => e.name === "sponsorship-request")!;
    // Disjoint wallets for each run of each round: every request is a new one (201), never a 409.
    const chunk = Math.floor(data.freshRegisteredWallets.length / (settings.rounds * 3));
    const wallets = (round: number, k: number) => data.freshRegisteredWallets.slice((round * 3 + k) * chunk, (round * 3 + k + 1) * chunk);
    const single: number[] = [];
    const double: [number, number][] = [];
    for (let round = 0; round < settings.rounds; round++) {
      const one = await runEndpoint(stack.url, post(wallets(round, 0)), {
        connections: settings.connections,
        seconds: settings.seconds,
        warmupSeconds: 1,
      });
      single.push(one.reqPerSec);
      const half = Math.max(1, Math.floor(settings.connections / 2));
      const [a, b] = await Promise.all(
        [stack.url, url2].map((url, k) => runEndpoint(url, post(wallets(round, 1 + k)), { connections: half, seconds: settings.seconds, warmupSeconds: 1 })),
      );
      double.push([a!.reqPerSec, b!.reqPerSec]);
    }
    await rejectOpenRequests(stack.databaseUrl!);
    process.kill(worker2.pid, "SIGCONT");
    stack.resumeWorker();

    // Pipeline: requests spread over both web servers, relayed by both workers.
    await bothLease();
    const pipeline = await measurePipeline({ ...common, baseUrls: [stack.url, url2], mode: "burst", concurrency: settings.burstConcurrency, cpu });
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    return {
      single: { postRequestPerSec: mean(single), pipelinePerSec: singlePipeline.completedPerSecond, pipeline: singlePipeline },
      double: {
        postRequestPerSec: mean(double.map(([a, b]) => a + b)),
        perInstance: [mean(double.map(([a]) => a)), mean(double.map(([, b]) => b))],
        pipelinePerSec: pipeline.completedPerSecond,
        pipeline,
      },
      relayerLeases: leases,
    };
  } finally {
    await Promise.all([web2.stop(), worker2.stop()]);
  }
}

async function truncateForGrowth(databaseUrl: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`SET lock_timeout = '10s'`;
    await sql`TRUNCATE sponsorship_requests, relay_transactions, request_events, wallets, rate_limit_hits, blocks CASCADE`;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function main(): Promise<void> {
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const outDir = path.join(ROOT, "bench", "results", stamp);
  mkdirSync(outDir, { recursive: true });
  const report: BenchReport = {
    startedAt: new Date().toISOString(),
    machine: machine(),
    versions: {
      node: process.versions.node,
      next: version("next"),
      react: version("react"),
      "drizzle-orm": version("drizzle-orm"),
      postgres: version("postgres"),
      viem: version("viem"),
      autocannon: version("autocannon"),
      anvil: anvilVersion(),
    },
    settings: {
      ...settings,
      phases: settings.phases.join(","),
      growth: settings.growth.join(","),
      chainMemory: `${settings.chainMemory.transactions},${settings.chainMemory.rate},${settings.chainMemory.idleSeconds}`,
    },
    chains: [],
    targets: [],
    notes: [],
  };
  const save = () => {
    report.targets = evaluateTargets(report);
    writeFileSync(path.join(outDir, "report.json"), JSON.stringify(report, null, 2));
    writeFileSync(path.join(outDir, "report.md"), renderMarkdown(report));
    writeFileSync(path.join(ROOT, "bench", "results", "latest.json"), JSON.stringify(report, null, 2));
    writeFileSync(path.join(ROOT, "bench", "results", "latest.md"), renderMarkdown(report));
  };

  const stacks: Stack[] = [];
  const stopAll = async () => {
    for (const s of stacks.splice(0)) await s.stop().catch((e: unknown) => note(`stopping ${s.name}: ${String(e)}`));
  };
  let interrupted = false;
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    note("interrupted: stopping what the bench started");
    void stopAll().then(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    if (env.BENCH_URL) {
      const stack = await attachStack(env);
      report.versions.postgresql = await serverVersion(stack.databaseUrl);
      report.http = await runHttpSuite(stack, report.notes);
      save();
      if (stack.databaseUrl && stack.rpcUrl && stack.treasuryAddress && (has("pipeline1") || has("pipeline0"))) {
        const common = {
          baseUrls: [stack.url],
          databaseUrl: stack.databaseUrl,
          rpcUrl: stack.rpcUrl,
          treasury: stack.treasuryAddress,
          requests: settings.requests,
        };
        report.chains.push({ blockTime: -1, burst: await measurePipeline({ ...common, mode: "burst", concurrency: settings.burstConcurrency }) });
        report.notes.push("Attached to BENCH_URL: the chain's block time is whatever that stack runs (shown as -1); no ceiling.");
      }
    } else {
      if (has("http") || has("pipeline1") || has("growth") || has("scaleout") || has("budget")) {
        const stack = await startStack({ name: "block1", blockTime: 1, logDir: outDir });
        stacks.push(stack);
        report.versions.postgresql = await serverVersion(stack.databaseUrl);
        if (has("pipeline1")) {
          report.chains.push(await runChain(stack, 1));
          save();
        }
        if (has("http")) {
          stack.pauseWorker();
          report.notes.push("HTTP figures are taken with the worker paused (SIGSTOP), so relaying does not compete for the two cores.");
          report.http = await runHttpSuite(stack, report.notes);
          const rejected = await rejectOpenRequests(stack.databaseUrl!);
          report.notes.push(`${rejected} requests created by the HTTP run were marked rejected before the worker resumed.`);
          stack.resumeWorker();
          save();
        }
        if (has("budget")) {
          report.budget = await runBudget(stack, outDir);
          save();
        }
        if (has("scaleout")) {
          report.scaleOut = await runScaleOut(stack, outDir);
          save();
        }
        if (has("growth")) {
          stack.pauseWorker();
          await truncateForGrowth(stack.databaseUrl!);
          report.growth = await measureGrowth({
            baseUrl: stack.url,
            databaseUrl: stack.databaseUrl!,
            levels: settings.growth,
            connections: settings.connections,
            seconds: settings.seconds,
            rounds: settings.rounds,
          });
          stack.resumeWorker();
          save();
        }
        await stopAll();
      }
      if (has("e2e")) {
        report.endToEnd = await runEndToEnd({
          logDir: outDir,
          requests: settings.requests,
          clients: int(env.BENCH_E2E_CLIENTS, 32),
          idleSeconds: int(env.BENCH_IDLE_SECONDS, 60),
        });
        save();
      }
      if (has("pipeline0")) {
        const stack = await startStack({ name: "block0", blockTime: 0, logDir: outDir });
        stacks.push(stack);
        report.chains.push(await runChain(stack, 0));
        save();
        await stopAll();
      }
      if (has("compare")) {
        const otherRoots = (env.BENCH_COMPARE_ROOTS ?? "")
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean);
        if (otherRoots.length === 0) throw new Error("BENCH_PHASES=compare needs BENCH_COMPARE_ROOTS (other checkouts to run beside this one)");
        report.compare = await compareTrees({
          otherRoots,
          thisRoot: ROOT,
          logDir: outDir,
          seconds: settings.seconds,
          rounds: settings.rounds,
          connections: settings.connections,
          profile: env.BENCH_PROFILE === "1",
        });
        save();
      }
      if (has("chainmemory")) {
        // Its own chain, nothing else running: anvil's resident memory under sponsorships (issue 11, item 10).
        report.chainMemory = await runChainMemoryPhase(settings.chainMemory);
        save();
      }
    }
  } finally {
    await stopAll();
    closeApiConnections();
    report.finishedAt = new Date().toISOString();
    save();
  }
  process.stdout.write(renderMarkdown(report) + "\n");
  process.stdout.write(`\nResults: ${path.relative(ROOT, outDir)}/report.{json,md}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
