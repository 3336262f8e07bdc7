import { spawn } from "node:child_process";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { openSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { closeDatabase, createDatabase, type Database } from "@/db/client";
import { startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { parseConfig } from "@/lib/config";
import { createSponsorshipRequest } from "@/lib/sponsorship/create-request";
import { registerWallet } from "@/lib/sponsorship/wallets";
import type { Address } from "@/lib/sponsorship/address";
import { freePort } from "@/test/ports";
import { clusterTicks, processTicks, TICK_MS } from "./cpu";
import { waitFor } from "./util";
import { startProbeChain } from "./probe-chain";

/**
 * The worker's CPU per sponsorship (docs/worker.md "CPU per sponsorship"): a private embedded PostgreSQL and anvil,
 * N pending requests created through the API's domain functions (registerWallet + createSponsorshipRequest) before
 * the worker starts, then one real worker process (`node --import tsx worker/index.ts`, as `npm start` runs it, with
 * the bench's LOG_LEVEL=warn) until all N are completed. CPU is user + system time from /proc/<pid>/stat, counted
 * from the moment the worker's first heartbeat row appears (start-up done, no stage has run yet) to the moment the
 * last request is completed. PostgreSQL (the whole cluster) and anvil are reported alongside.
 *
 *   npx tsx bench/worker-cpu.ts [--n 1000] [--block-time 1] [--runs 2] [--relayers 4] [--rate R] [--cpu-prof DIR]
 *
 * `--rate R` creates the N requests at R per second while the worker runs instead (as the API feeds it in the
 * end-to-end bench: smaller batches, one wake-up per burst), counted the same way.
 * `--node-arg X` (repeatable) passes X to the worker's node (e.g. `--node-arg=--import=/tmp/counters.mjs`).
 * `--log-level`/`--log-file` run the worker with another LOG_LEVEL (default warn, as the bench) and keep its stdout.
 * `--block-time 0` mines each transaction at once. `--cpu-prof DIR` passes node's --cpu-prof to the worker (the
 * profile is written when the worker stops). Rely on CPU per sponsorship, not wall time, on a shared machine.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

const { values: args } = parseArgs({
  options: {
    n: { type: "string", default: "1000" },
    "block-time": { type: "string", default: "1" },
    runs: { type: "string", default: "2" },
    relayers: { type: "string", default: "4" },
    rate: { type: "string", default: "0" },
    "log-level": { type: "string", default: "warn" },
    "log-file": { type: "string" },
    "cpu-prof": { type: "string" },
    "node-arg": { type: "string", multiple: true },
  },
});
const N = Number(args.n);
const BLOCK_TIME = Number(args["block-time"]);
const RUNS = Number(args.runs);
const RELAYERS = Number(args.relayers);
/** 0: all N created before the worker starts; otherwise created at this rate per second while it runs. */
const RATE = Number(args.rate);

type RunResult = {
  workerMs: number;
  workerSystemMs: number;
  postgresMs: number;
  anvilMs: number;
  wallMs: number;
  startupMs: number;
  completed: number;
  failed: number;
};

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "worker-cpu-"));
  const pg = await startEmbeddedPostgres({ dataDir, port: await freePort() });
  const postmaster = Number(readFileSync(path.join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[0]);
  await applyMigrations(pg.url);
  const db: Database = createDatabase(pg.url, { max: 20, applicationName: "worker-cpu-bench" });
  const results: RunResult[] = [];
  try {
    for (let run = 1; run <= RUNS; run++) {
      await db.execute(
        sql`TRUNCATE sponsorship_requests, relay_transactions, relayer_nonce_fills, relayer_accounts, worker_heartbeats, wallets, rate_limit_hits, request_events CASCADE`,
      );
      results.push(await oneRun(run, db, pg.url, dataDir, postmaster));
    }
  } finally {
    await closeDatabase(db).catch(() => {});
    await pg.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
  const per = results.map((r) => r.workerMs / N);
  process.stdout.write(
    `\nworker CPU per sponsorship (ms): ${per.map((p) => p.toFixed(3)).join(", ")}  (N=${N}, block time ${BLOCK_TIME}s, ${RELAYERS} relayers)\n`,
  );
}

async function oneRun(run: number, db: Database, databaseUrl: string, dataDir: string, postmaster: number): Promise<RunResult> {
  const anvil = await startProbeChain({ name: "worker-cpu", blockTime: BLOCK_TIME, relayers: RELAYERS, sponsorAmountWei: 10n ** 16n, sponsorships: N });
  try {
    const env: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      ...anvil.env,
      DATA_DIR: dataDir,
      RATE_LIMIT_IP_PER_HOUR: "1000000",
      RATE_LIMIT_WALLET_PER_HOUR: "1000000",
      REGISTER_LIMIT_IP_PER_HOUR: "1000000",
      REPLAY_WINDOW_MS: "0",
      LOG_LEVEL: args["log-level"],
    };
    const config = parseConfig(env);

    // N pending requests through the API's domain functions, before the worker exists.
    const created = performance.now();
    let counter = 0;
    const createOne = async () => {
      const i = ++counter;
      const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      const wallet = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
      await registerWallet(db, { walletAddress: wallet, ip }, { config });
      await createSponsorshipRequest(db, { walletAddress: wallet, ip, userAgent: "worker-cpu" }, { config });
    };
    if (RATE === 0) for (let i = 0; i < N; i += 20) await Promise.all(Array.from({ length: Math.min(20, N - i) }, createOne));
    const createdMs = performance.now() - created;

    const nodeArgs: string[] = [];
    const profDir = args["cpu-prof"] ? path.resolve(args["cpu-prof"]) : undefined;
    if (profDir) nodeArgs.push("--cpu-prof", `--cpu-prof-dir=${profDir}`);
    nodeArgs.push(...(args["node-arg"] ?? []));
    const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", path.join(ROOT, "worker", "index.ts")], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NODE_ENV: "production", ...env } as NodeJS.ProcessEnv,
      stdio: ["ignore", args["log-file"] ? openSync(path.resolve(args["log-file"]), "a") : "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const pid = child.pid!;
    const spawnedAt = performance.now();

    try {
      // Start-up is over when the first heartbeat row appears: the loop has not run a stage yet.
      await waitFor(
        "the worker's first heartbeat",
        async () => {
          if (child.exitCode !== null) throw new Error(`worker exited ${child.exitCode}: ${stderr.slice(-2000)}`);
          const [row] = await db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM worker_heartbeats WHERE pid = ${pid}`);
          return (row?.n ?? 0) > 0 ? true : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 5 },
      );
      const w0 = processTicks(pid);
      const ws0 = processTicks(pid, { only: "system" });
      const p0 = clusterTicks(postmaster);
      const a0 = processTicks(anvil.pid);
      const t0 = performance.now();
      let paced: Promise<unknown> = Promise.resolve();
      if (RATE > 0) {
        // Request i is due at t0 + i / RATE; each tick creates what is due (concurrently, as many clients would).
        paced = (async () => {
          const pending: Promise<void>[] = [];
          for (let made = 0; made < N;) {
            const due = Math.min(N, Math.floor(((performance.now() - t0) * RATE) / 1000) + 1);
            for (; made < due; made++) pending.push(createOne());
            await new Promise((r) => setTimeout(r, 5));
          }
          await Promise.all(pending);
        })();
      }
      const counts = await waitFor(
        `${N} requests to finish`,
        async () => {
          const rows = await db.execute<{ status: string; n: number }>(sql`SELECT status, count(*)::int AS n FROM sponsorship_requests GROUP BY status`);
          const c = Object.fromEntries(rows.map((r) => [r.status, r.n])) as Record<string, number>;
          return (c.completed ?? 0) + (c.failed ?? 0) + (c.rejected ?? 0) >= N ? c : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 20 },
      ).catch((error: unknown) => {
        throw new Error(`${error instanceof Error ? error.message : String(error)}; the worker's last log lines:\n${stderr.split("\n").slice(-4).join("\n")}`);
      });
      await paced;
      const wallMs = performance.now() - t0;
      const result: RunResult = {
        workerMs: (processTicks(pid) - w0) * TICK_MS,
        workerSystemMs: (processTicks(pid, { only: "system" }) - ws0) * TICK_MS,
        postgresMs: (clusterTicks(postmaster) - p0) * TICK_MS,
        anvilMs: (processTicks(anvil.pid) - a0) * TICK_MS,
        wallMs,
        startupMs: w0 * TICK_MS,
        completed: counts.completed ?? 0,
        failed: (counts.failed ?? 0) + (counts.rejected ?? 0),
      };
      process.stdout.write(
        `run ${run}: ${N} requests (${RATE > 0 ? `created at ${RATE}/s while the worker ran` : `created in ${(createdMs / 1000).toFixed(1)} s before`}), start-up ${result.startupMs} ms CPU (${Math.round(t0 - spawnedAt)} ms wall); ` +
          `completed ${result.completed}, failed/rejected ${result.failed}; wall ${(wallMs / 1000).toFixed(2)} s (${Math.round((N * 1000) / wallMs)}/s); ` +
          `CPU ms: worker ${result.workerMs} (${(result.workerMs / N).toFixed(3)} per sponsorship, system ${result.workerSystemMs}), postgres ${result.postgresMs} (${(result.postgresMs / N).toFixed(3)}), anvil ${result.anvilMs} (${(result.anvilMs / N).toFixed(3)})\n`,
      );
      return result;
    } finally {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await exited;
      clearTimeout(timer);
      // Whatever the worker wrote to stderr that is not a JSON log line (a --node-arg preload's counters).
      for (const line of stderr.split("\n")) if (line.trim() && !line.startsWith("{")) process.stdout.write(`worker stderr: ${line}\n`);
      if (profDir) {
        const files = (await readdir(profDir)).filter((f) => f.endsWith(".cpuprofile"));
        process.stdout.write(`cpu profiles in ${profDir}: ${files.length}\n`);
      }
    }
  } finally {
    await anvil.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`worker-cpu: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
