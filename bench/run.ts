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
import { runBudget } from "./budget";
import { httpData, rejectOpenRequests } from "./http-data";
import { runScaleOut } from "./scale-out";
import { env, has, int, settings } from "./settings";
import { measureGrowth } from "./growth";
import { runInterleaved, standardEndpoints, type HttpResult } from "./http";
import { measurePipeline } from "./pipeline";
import { renderMarkdown, type BenchReport, type ChainRun } from "./report";
import { evaluateTargets } from "./targets";
import { attachStack, startStack, type Stack } from "./stack";
import { note } from "./util";

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
 * BENCH_COMPARE_ROOTS (comma-separated), with BENCH_PROFILE=1 a --cpu-prof web server of each, and
 * BENCH_COMPARE_PIPELINE (500, 0 for none) requests per pipeline burst of each tree and round, BENCH_COMPARE_E2E (0: none)
 * sponsorships per end-to-end burst of each tree and round, BENCH_COMPARE_HTTP=0 to leave out the HTTP rounds (bench/compare.ts).
 */

const ROOT = path.resolve(import.meta.dirname, "..");

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
          warmup: int(env.BENCH_E2E_WARMUP, 300),
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
          http: env.BENCH_COMPARE_HTTP !== "0",
          pipelineRequests: int(env.BENCH_COMPARE_PIPELINE, 500),
          endToEndRequests: int(env.BENCH_COMPARE_E2E, 0),
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
