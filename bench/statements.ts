import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { closeDatabase, createDatabase } from "@/db/client";
import { embeddedSuperuserUrl, startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { parseConfig } from "@/lib/config";
import { createSponsorshipRequest } from "@/lib/sponsorship/create-request";
import { registerWallet } from "@/lib/sponsorship/wallets";
import type { Address } from "@/lib/sponsorship/address";
import { freePort } from "@/test/ports";
import { clusterTicks, processTicks, TICK_MS } from "./cpu";
import { waitFor } from "./util";
import { startProbeChain } from "./probe-chain";
import { BENCH_LIMITS } from "./stack";

/**
 * What PostgreSQL does per completed sponsorship (issue 15, docs/performance.md "Session 6: cuts"): a private
 * embedded PostgreSQL started by this probe alone with `shared_preload_libraries=pg_stat_statements` and
 * `track_functions=all` (ALTER SYSTEM on the probe's own cluster, then a restart; the product never loads them),
 * a private anvil with the contracts, and one real worker process (`node --import tsx worker/index.ts`, as
 * `npm start` runs it). Each sponsorship is the end-to-end flow: registerWallet then createSponsorshipRequest (the
 * domain functions POST /wallets/register and POST /sponsorship/request call, same SQL, no HTTP), created at
 * `--rate` per second while the worker reviews, relays and confirms.
 *
 * A warm-up of `--warmup` sponsorships runs first; then every counter is reset (pg_stat_statements_reset,
 * pg_stat_reset, pg_stat_reset_shared wal/io) after a pause of 2 s (a backend flushes its pending counters at most
 * once a second), N sponsorships run, and once all are completed the worker is stopped and the probe's pools closed
 * (every backend flushes its counters at exit) before the statistics are read. Printed per completed sponsorship:
 * statements by query (calls, rows, total and mean ms; top level and nested in functions apart), transactions
 * (xact_commit, minus the probe's own polls), WAL (records, full-page images, bytes) and WAL fsyncs/writes
 * (pg_stat_io), rows inserted/updated (HOT apart)/deleted per table, functions and triggers (calls, self ms), and
 * the cluster's CPU (postmaster + children, /proc).
 *
 *   npx tsx bench/statements.ts [--n 1000] [--warmup 100] [--rate 100] [--block-time 1] [--relayers 4] [--top 25]
 *
 * The worker's own background work (heartbeats, polls, its shutdown) is inside the window, as in production. Only
 * ratios between runs on the same machine mean anything for the timings; the counts are exact.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

const { values: args } = parseArgs({
  options: {
    n: { type: "string", default: "1000" },
    warmup: { type: "string", default: "100" },
    rate: { type: "string", default: "100" },
    "block-time": { type: "string", default: "1" },
    relayers: { type: "string", default: "4" },
    top: { type: "string", default: "25" },
  },
});
const N = Number(args.n);
const WARMUP = Number(args.warmup);
const RATE = Number(args.rate);
const BLOCK_TIME = Number(args["block-time"]);
const RELAYERS = Number(args.relayers);
const TOP = Number(args.top);

/** CPU ticks of each live server process by what it serves: application_name, or the backend type (walwriter, ...). */
async function cpuByPart(admin: postgres.Sql): Promise<Map<number, { part: string; ticks: number }>> {
  const rows = await admin<{ pid: number; part: string }[]>`
    SELECT pid, CASE WHEN backend_type = 'client backend' THEN coalesce(nullif(application_name, ''), 'client') ELSE backend_type END AS part
    FROM pg_stat_activity WHERE pid <> pg_backend_pid()`;
  return new Map(rows.map((r) => [r.pid, { part: r.part, ticks: processTicks(r.pid, { reaped: true }) }]));
}

const fmt = (x: number, digits = 2) => (Number.isInteger(x) && digits === 0 ? String(x) : x.toFixed(digits));
const oneLine = (q: string) => q.replace(/\s+/g, " ").trim();

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "statements-probe-"));
  const port = await freePort();
  let pg = await startEmbeddedPostgres({ dataDir, port });
  // The probe's own cluster only: pg_stat_statements is preloaded here and nowhere in the product.
  const setup = postgres(pg.adminUrl, { max: 1, onnotice: () => {} });
  await setup.unsafe(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
  await setup.unsafe(`ALTER SYSTEM SET track_functions = 'all'`);
  await setup.unsafe(`ALTER SYSTEM SET pg_stat_statements.track = 'all'`);
  await setup.end();
  await pg.stop();
  pg = await startEmbeddedPostgres({ dataDir, port });
  const postmaster = pg.pid;
  await applyMigrations(pg.url);
  const admin = postgres(embeddedSuperuserUrl(dataDir, port), { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);

  const anvil = await startProbeChain({
    name: "statements-probe",
    blockTime: BLOCK_TIME,
    relayers: RELAYERS,
    sponsorAmountWei: 10n ** 15n,
    sponsorships: N + WARMUP,
  });
  let child: ReturnType<typeof spawn> | undefined;
  let exited: Promise<unknown> = Promise.resolve();
  try {
    const env: Record<string, string> = {
      DATABASE_URL: pg.url,
      ...anvil.env,
      DATA_DIR: dataDir,
      ...BENCH_LIMITS,
      LOG_LEVEL: "warn",
    };
    const config = parseConfig(env);
    // Two pools, so the cluster's CPU splits into the two API calls by application_name.
    const pools = () => ({
      register: createDatabase(pg.url, { max: 10, applicationName: "probe-register" }),
      request: createDatabase(pg.url, { max: 10, applicationName: "probe-request" }),
    });
    let db = pools();

    let counter = 0;
    // One client's sponsorship as the end-to-end bench makes it: register a fresh wallet, then request it.
    const sponsorOne = async () => {
      const i = ++counter;
      const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      const wallet = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
      await registerWallet(db.register, { walletAddress: wallet, ip }, { config });
      await createSponsorshipRequest(db.request, { walletAddress: wallet, ip, userAgent: "statements-probe" }, { config });
    };
    let polls = 0;
    const finished = async (total: number) => {
      polls++;
      const [row] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM sponsorship_requests WHERE status IN ('completed', 'failed', 'rejected')`;
      return (row?.n ?? 0) >= total ? row!.n : undefined;
    };
    /** N sponsorships at RATE per second (as many concurrent clients as that takes), then until all are settled. */
    const burst = async (n: number, total: number) => {
      const t0 = performance.now();
      const pending: Promise<void>[] = [];
      for (let made = 0; made < n;) {
        const due = Math.min(n, Math.floor(((performance.now() - t0) * RATE) / 1000) + 1);
        for (; made < due; made++) pending.push(sponsorOne());
        await new Promise((r) => setTimeout(r, 5));
      }
      await Promise.all(pending);
      await waitFor(`${total} requests settled`, () => finished(total), { timeoutMs: 180_000, intervalMs: 50 });
      return performance.now() - t0;
    };

    let stderr = "";
    child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "worker", "index.ts")], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NODE_ENV: "production", ...env } as NodeJS.ProcessEnv,
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr?.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
    exited = new Promise((resolve) => child!.once("exit", resolve));
    const worker = child;
    await waitFor(
      "the worker's first heartbeat",
      async () => {
        if (worker.exitCode !== null) throw new Error(`worker exited ${worker.exitCode}: ${stderr.slice(-2000)}`);
        const [row] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM worker_heartbeats WHERE pid = ${worker.pid!}`;
        return (row?.n ?? 0) > 0 ? true : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 20 },
    );

    if (WARMUP > 0) await burst(WARMUP, WARMUP);
    // A backend flushes its pending counters when it exits, or idle within 10 s (PGSTAT_IDLE_INTERVAL): the probe's
    // pool is replaced and the worker's backends are given 11 s, so nothing of the warm-up lands after the reset.
    await Promise.all([closeDatabase(db.register), closeDatabase(db.request)]);
    db = pools();
    await new Promise((r) => setTimeout(r, 11_000));
    await admin.unsafe(`SELECT pg_stat_statements_reset(), pg_stat_reset(), pg_stat_reset_shared('wal'), pg_stat_reset_shared('io')`);
    polls = 0;
    const cpu0 = clusterTicks(postmaster);
    const parts0 = await cpuByPart(admin);
    const wallMs = await burst(N, N + WARMUP);
    // Each live process's CPU in the window, by part (a process that started in the window counts from zero).
    const parts1 = await cpuByPart(admin);
    const byPart = new Map<string, number>();
    for (const [pid, p] of parts1) byPart.set(p.part, (byPart.get(p.part) ?? 0) + (p.ticks - (parts0.get(pid)?.ticks ?? 0)) * TICK_MS);
    // Every backend flushes its counters when it exits: stop the worker and close the probe's pool first.
    worker.kill("SIGTERM");
    await exited;
    child = undefined;
    await Promise.all([closeDatabase(db.register), closeDatabase(db.request)]);
    const cpuMs = (clusterTicks(postmaster) - cpu0) * TICK_MS;

    const [status] = await admin<{ completed: number; other: number }[]>`
      SELECT count(*) FILTER (WHERE status = 'completed')::int AS completed, count(*) FILTER (WHERE status <> 'completed')::int AS other
      FROM sponsorship_requests`;
    const completed = (status?.completed ?? 0) - WARMUP;
    const per = (x: number | string) => Number(x) / completed;
    const out: string[] = [];
    out.push(
      `${N} sponsorships (register + request + review + relay + confirm) at ${RATE}/s, ${BLOCK_TIME}-s blocks, ${RELAYERS} relayers, after ${WARMUP} to warm up: ` +
        `${completed} completed in the window, ${status?.other ?? 0} not completed overall, wall ${(wallMs / 1000).toFixed(1)} s`,
    );
    out.push(`PostgreSQL cluster CPU: ${cpuMs} ms, ${fmt(cpuMs / completed, 3)} ms per completed sponsorship`);
    out.push(
      `  by part (live processes, ms per sponsorship; probe-register and probe-request are the API's two calls): ` +
        [...byPart]
          .sort((a, b) => b[1] - a[1])
          .map(([part, ms]) => `${part} ${fmt(ms / completed, 3)}`)
          .join(", "),
    );

    const [dbStats] = await admin<{ xact_commit: string; xact_rollback: string }[]>`
      SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()`;
    // The probe's own transactions in the window are its polls (this session's reads are flushed after this query).
    const commits = Number(dbStats?.xact_commit ?? 0) - polls;
    out.push(
      `transactions committed: ${fmt(per(commits))} per sponsorship (${commits} in all, the probe's ${polls} polls taken out); rolled back: ${dbStats?.xact_rollback ?? 0}`,
    );

    const [wal] = await admin<{ wal_records: string; wal_fpi: string; wal_bytes: string }[]>`SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal`;
    const [io] = await admin<{ writes: string | null; fsyncs: string | null; write_bytes: string | null }[]>`
      SELECT sum(writes)::bigint AS writes, sum(fsyncs)::bigint AS fsyncs, sum(write_bytes)::bigint AS write_bytes FROM pg_stat_io WHERE object = 'wal'`;
    out.push(
      `WAL per sponsorship: ${fmt(per(wal?.wal_records ?? 0), 1)} records, ${fmt(per(wal?.wal_fpi ?? 0), 2)} full-page images, ${fmt(per(wal?.wal_bytes ?? 0), 0)} bytes; ` +
        `WAL writes ${fmt(per(io?.writes ?? 0), 2)}, fsyncs ${fmt(per(io?.fsyncs ?? 0), 2)}`,
    );

    const tables = await admin<{ relname: string; ins: string; upd: string; hot: string; del: string }[]>`
      SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del FROM pg_stat_user_tables
      WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC`;
    out.push("", "rows written per sponsorship, by table:", "| table | inserted | updated | of which HOT | deleted |", "|---|--:|--:|--:|--:|");
    for (const t of tables) out.push(`| ${t.relname} | ${fmt(per(t.ins))} | ${fmt(per(t.upd))} | ${fmt(per(t.hot))} | ${fmt(per(t.del))} |`);

    const indexes = await admin<{ table: string; index: string; scans: string }[]>`
      SELECT relname AS table, indexrelname AS index, idx_scan AS scans FROM pg_stat_user_indexes
      WHERE relname IN (SELECT relname FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0) ORDER BY relname, indexrelname`;
    out.push("", "indexes of the tables written, scans per sponsorship (0: written on every insert or non-HOT update, read by nothing in this flow):");
    out.push(indexes.map((i) => `${i.index} ${fmt(per(i.scans))}`).join(", "));

    const functions = await admin<{ funcname: string; calls: string; total_time: number; self_time: number }[]>`
      SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions ORDER BY self_time DESC`;
    out.push("", "functions and triggers per sponsorship (track_functions=all):", "| function | calls | total ms | self ms |", "|---|--:|--:|--:|");
    for (const f of functions) out.push(`| ${f.funcname} | ${fmt(per(f.calls))} | ${fmt(per(f.total_time), 4)} | ${fmt(per(f.self_time), 4)} |`);

    type StatementRow = { toplevel: boolean; query: string; calls: string; rows: string; total: number; mean: number };
    const statements: StatementRow[] = await admin<StatementRow[]>`
      SELECT s.toplevel, s.query, s.calls, s.rows, s.total_exec_time AS total, s.mean_exec_time AS mean
      FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
      WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND r.rolname = 'sponsorship'
      ORDER BY s.total_exec_time DESC`;
    const top = statements.filter((s) => s.toplevel);
    const nested = statements.filter((s) => !s.toplevel);
    const sum = (rows: StatementRow[], f: (s: StatementRow) => number) => rows.reduce((a, s) => a + f(s), 0);
    out.push(
      "",
      `statements per sponsorship (the service's role): top level ${fmt(per(sum(top, (s) => Number(s.calls))))} calls, ${fmt(per(sum(top, (s) => s.total)), 3)} ms executing; ` +
        `nested in functions ${fmt(per(sum(nested, (s) => Number(s.calls))))} calls, ${fmt(per(sum(nested, (s) => s.total)), 3)} ms`,
    );
    for (const [title, rows] of [
      ["top level", top],
      ["nested in functions and triggers", nested],
    ] as const) {
      out.push("", `${title}, by total time (first ${TOP}):`, "| calls | rows | total ms | mean ms | query |", "|--:|--:|--:|--:|---|");
      for (const s of rows.slice(0, TOP)) {
        const q = oneLine(s.query);
        out.push(
          `| ${fmt(per(s.calls))} | ${fmt(per(s.rows))} | ${fmt(per(s.total), 4)} | ${fmt(s.mean, 4)} | \`${q.length > 140 ? `${q.slice(0, 140)}…` : q}\` |`,
        );
      }
    }
    process.stdout.write(`${out.join("\n")}\n`);
  } finally {
    if (child) {
      child.kill("SIGTERM");
      await exited;
    }
    await admin.end().catch(() => {});
    await anvil.stop();
    await pg.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`statements: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
