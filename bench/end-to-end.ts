import { mkdirSync } from "node:fs";
import path from "node:path";
import postgres from "postgres";
import type { Hex } from "viem";
import { requestIdHash } from "@/lib/chain/ids";
import { freePort } from "@/test/ports";
import { startCountingRpcProxy, type CountingRpcProxy } from "@/test/rpc-proxy";
import { registerWallet, requestSponsorship } from "./api";
import { sponsoredTopic } from "./ceiling";
import { cpuBetween, snapshotCpu, withExtraPids } from "./cpu";
import { renderProfileSummary, summariseProfiles, type ProfileSummary } from "./profile";
import { rpc } from "./rpc";
import { healthy, spawnInstance, startStack, type Stack } from "./stack";
import { note, percentile, randomAddress, round, waitFor, type Address } from "./util";

/**
 * The end-to-end burst (issue 15 items 1 and 3, issue 12 item 6), `BENCH_PHASES=e2e`: the shape PoWFaucet was
 * measured with. A stack at 1-s blocks; its own worker is paused (SIGSTOP) and replaced by one whose JSON-RPC goes
 * through a counting proxy (test/rpc-proxy.ts), and the clients talk to a second web server with its own counting
 * proxy. After `BENCH_E2E_WARMUP` (300) sponsorships through the fresh processes, `BENCH_E2E_CLIENTS` clients (32) each take a
 * fresh wallet, register it, then request its sponsorship, until `BENCH_REQUESTS` (1,000) are requested; the clock
 * runs from the first registration to the last completion. Reported: completed/s, request -> completed
 * percentiles, CPU ms per completed sponsorship of every process (register + request + relay + confirm), JSON-RPC
 * calls per completed sponsorship by method, then the calls of an idle minute (no requests), the chain's word (one
 * Sponsored event per request, no wallet paid twice). Then the same burst again with both processes under
 * `node --cpu-prof` (the profiler's own CPU would distort the first burst's figures): the profiles are written into the
 * run's results folder (`profiles/e2e-web`, `profiles/e2e-worker`) and their top items, from the burst's start on,
 * reported.
 */

export type EndToEndResult = {
  clients: number;
  requests: number;
  /** Sponsorships through the same processes before the measured ones. */
  warmup: number;
  blockTime: number;
  seconds: number;
  completedPerSecond: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
  statuses: Record<string, number>;
  relayAttempts: number;
  onChain: { sponsoredEvents: number; walletsPaidTwice: number };
  cpuMsPerCompleted: Record<string, number>;
  cpuMsPerCompletedTotal: number;
  rpc: {
    worker: { calls: number; perCompleted: number; byMethod: Record<string, number> };
    web: { calls: number; perCompleted: number; byMethod: Record<string, number> };
    idle: { seconds: number; worker: number; perMinute: number; byMethod: Record<string, number> };
  };
  /** The second burst, under the profiler (its figures are not the service's). */
  profiled: { completedPerSecond: number; walletsPaidTwice: number };
  profiles: { process: string; summary: ProfileSummary }[];
};

const diffCounts = (after: Record<string, number>, before: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(after).flatMap(([k, v]) => (v - (before[k] ?? 0) > 0 ? [[k, v - (before[k] ?? 0)] as const] : [])));

type Pass = {
  seconds: number;
  completed: number;
  latencies: number[];
  statuses: Record<string, number>;
  relayAttempts: number;
  onChain: { sponsoredEvents: number; walletsPaidTwice: number };
  cpuMs: Record<string, number>;
  rpc: { worker: Record<string, number>; web: Record<string, number> };
  idle?: Record<string, number>;
  profiles: { process: string; summary: ProfileSummary }[];
};

/**
 * The clients of the end-to-end shape: `count` fresh wallets, each registered then requested by one of `clients`
 * clients that take the next wallet as soon as their last is requested; resolves with the request ids once every
 * request is terminal.
 */
export async function clientsBurst(url: string, sql: postgres.Sql, count: number, clients: number): Promise<string[]> {
  const wallets = Array.from({ length: count }, () => randomAddress() as Address);
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = next++; i < count; i = next++) {
        await registerWallet(url, wallets[i]!);
        ids.push(await requestSponsorship(url, wallets[i]!));
      }
    }),
  );
  await waitFor(
    "every end-to-end request to reach a terminal status",
    async () => {
      const [r] = await sql<{ open: number }[]>`
        SELECT count(*)::int AS open FROM sponsorship_requests WHERE id = ANY(${ids}::uuid[]) AND status IN ('pending', 'approved', 'relayed')`;
      return r && r.open === 0 ? true : undefined;
    },
    { timeoutMs: 10 * 60_000, intervalMs: 100 },
  );
  return ids;
}

/**
 * One burst on a web server and a worker started for it (their JSON-RPC through the counting proxies). With
 * `profileDir`, both run under --cpu-prof and the profiles are summarised from the burst's start on (the
 * start-up's module loading left out); without, the figures are the processes' own (the profiler costs CPU too).
 */
async function burst(
  stack: Stack,
  proxies: { worker: CountingRpcProxy; web: CountingRpcProxy },
  options: { logDir: string; requests: number; clients: number; idleSeconds: number; warmup: number; profileDir?: string },
): Promise<Pass> {
  const dirs = options.profileDir ? { web: path.join(options.profileDir, "e2e-web"), worker: path.join(options.profileDir, "e2e-worker") } : undefined;
  for (const dir of Object.values(dirs ?? {})) mkdirSync(dir, { recursive: true });
  const prof = (dir: string | undefined) => (dir ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`] } : {});
  const port = await freePort();
  const spawned = Date.now();
  const web = spawnInstance(stack, "web", { PORT: String(port), RPC_URL: proxies.web.url }, options.logDir, prof(dirs?.web));
  const worker = spawnInstance(stack, "worker", { RPC_URL: proxies.worker.url }, options.logDir, prof(dirs?.worker));
  const instances = [web, worker];
  const url = `http://127.0.0.1:${port}`;
  const sql = postgres(stack.databaseUrl!, { max: 2, onnotice: () => {} });
  try {
    await waitFor("the burst's web server", async () => ((await healthy(url)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    note(`e2e: waiting for the burst's worker (pid ${worker.pid}) to hold every relayer`);
    await waitFor(
      "the burst's worker to lease every relayer",
      async () => {
        const rows = await sql<{ mine: number; total: number }[]>`
          SELECT count(*) FILTER (WHERE lease_owner LIKE ${`%:${worker.pid}:%`} AND lease_expires_at > now())::int AS mine,
                 count(*)::int AS total FROM relayer_accounts`;
        return rows[0] && rows[0].total > 0 && rows[0].mine === rows[0].total ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );

    const cpu = withExtraPids(stack.cpu!, { web: () => [web.pid], worker: () => [worker.pid] });
    const run = (count: number) => clientsBurst(url, sql, count, options.clients);
    // A service runs warm: the first requests of a fresh process pay for loading the routes' modules and for the
    // JIT, which a 10-s burst would spread over every sponsorship.
    if (options.warmup > 0) {
      note(`e2e${dirs ? " (profiled)" : ""}: warming up with ${options.warmup} sponsorships`);
      await run(options.warmup);
    }
    const n = options.requests;
    const startBlock = BigInt(await rpc<Hex>(stack.rpcUrl!, "eth_blockNumber"));
    note(`e2e${dirs ? " (profiled)" : ""}: ${options.clients} clients, each registers a fresh wallet then requests, ${n} in all`);
    const rpcBefore = { worker: proxies.worker.byMethod(), web: proxies.web.byMethod() };
    const cpuBefore = snapshotCpu(cpu);
    const t0 = Date.now();
    const ids = await run(n);
    const cpuMs = cpuBetween(cpuBefore, cpu);
    const rpcAfter = { worker: proxies.worker.byMethod(), web: proxies.web.byMethod() };
    const rows = await sql<{ status: string; requested_at: Date; completed_at: Date | null }[]>`
      SELECT status, requested_at, completed_at FROM sponsorship_requests WHERE id = ANY(${ids}::uuid[])`;
    const [attempts] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM relay_transactions WHERE sponsorship_request_id = ANY(${ids}::uuid[])`;
    const completed = rows.filter((r) => r.status === "completed" && r.completed_at);
    const last = Math.max(...completed.map((r) => r.completed_at!.getTime()));
    const statuses: Record<string, number> = {};
    for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;

    // The chain's word, through the node itself (not the proxies).
    const endBlock = BigInt(await rpc<Hex>(stack.rpcUrl!, "eth_blockNumber"));
    const logs = await rpc<{ topics: Hex[] }[]>(stack.rpcUrl!, "eth_getLogs", [
      { address: stack.treasuryAddress, fromBlock: `0x${(startBlock + 1n).toString(16)}`, toBlock: `0x${endBlock.toString(16)}`, topics: [sponsoredTopic()] },
    ]);
    const wanted = new Set(ids.map((id) => requestIdHash(id).toLowerCase()));
    const paid = new Map<string, number>();
    let events = 0;
    for (const log of logs) {
      if (!wanted.has((log.topics[2] ?? "").toLowerCase())) continue;
      events += 1;
      const wallet = `0x${(log.topics[1] ?? "").slice(26)}`.toLowerCase();
      paid.set(wallet, (paid.get(wallet) ?? 0) + 1);
    }

    let idle: Record<string, number> | undefined;
    if (!dirs && options.idleSeconds > 0) {
      // An idle minute: nothing requested; what the worker still asks the chain.
      note(`e2e: ${completed.length} completed in ${round((last - t0) / 1000, 1)} s; counting the worker's JSON-RPC calls over ${options.idleSeconds} idle s`);
      await new Promise((r) => setTimeout(r, 5_000));
      const idleBefore = proxies.worker.byMethod();
      await new Promise((r) => setTimeout(r, options.idleSeconds * 1000));
      idle = diffCounts(proxies.worker.byMethod(), idleBefore);
    }

    // Stopping (SIGTERM) writes the profiles.
    for (const i of instances.splice(0)) await i.stop();
    const fromMs = t0 - spawned;
    const profiles = dirs
      ? [
          ...summariseProfiles(dirs.web, stack.root, 25, fromMs).map((summary) => ({ process: "web server", summary })),
          ...summariseProfiles(dirs.worker, stack.root, 25, fromMs).map((summary) => ({ process: "worker", summary })),
        ]
      : [];
    return {
      seconds: (last - t0) / 1000,
      completed: completed.length,
      latencies: completed.map((r) => r.completed_at!.getTime() - r.requested_at.getTime()),
      statuses,
      relayAttempts: attempts?.n ?? 0,
      onChain: { sponsoredEvents: events, walletsPaidTwice: [...paid.values()].filter((c) => c > 1).length },
      cpuMs,
      rpc: { worker: diffCounts(rpcAfter.worker, rpcBefore.worker), web: diffCounts(rpcAfter.web, rpcBefore.web) },
      ...(idle ? { idle } : {}),
      profiles,
    };
  } finally {
    for (const i of instances.splice(0)) await i.stop().catch(() => {});
    await sql.end({ timeout: 5 });
  }
}

export async function runEndToEnd(options: {
  logDir: string;
  requests: number;
  clients: number;
  idleSeconds: number;
  /** Sponsorships run through each burst's fresh processes before the measured ones. */
  warmup: number;
}): Promise<EndToEndResult> {
  const stack = await startStack({ name: "e2e", blockTime: 1, logDir: options.logDir });
  const opened: CountingRpcProxy[] = [];
  try {
    const proxies = { worker: await startCountingRpcProxy(stack.rpcUrl!), web: await startCountingRpcProxy(stack.rpcUrl!) };
    opened.push(proxies.worker, proxies.web);
    // The stack's own worker steps aside; each burst's worker takes every relayer once the paused one's leases lapse.
    stack.pauseWorker();
    // First the figures (no profiler), then the same burst again under --cpu-prof for the profiles.
    const measured = await burst(stack, proxies, options);
    const profiled = await burst(stack, proxies, { ...options, idleSeconds: 0, profileDir: path.join(options.logDir, "profiles") });
    stack.resumeWorker();

    const per = (x: number) => round(x / Math.max(1, measured.completed), 2);
    const sum = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);
    const cpuPer = Object.fromEntries(Object.entries(measured.cpuMs).map(([k, v]) => [k, per(v)]));
    const idle = measured.idle ?? {};
    const lat = measured.latencies;
    return {
      clients: options.clients,
      requests: options.requests,
      warmup: options.warmup,
      blockTime: 1,
      seconds: round(measured.seconds, 2),
      completedPerSecond: round(measured.completed / measured.seconds, 1),
      latencyMs: { p50: Math.round(percentile(lat, 50)), p95: Math.round(percentile(lat, 95)), p99: Math.round(percentile(lat, 99)), max: Math.max(...lat) },
      statuses: measured.statuses,
      relayAttempts: measured.relayAttempts,
      onChain: measured.onChain,
      cpuMsPerCompleted: cpuPer,
      cpuMsPerCompletedTotal: round(
        Object.entries(cpuPer)
          .filter(([k]) => k !== "bench")
          .reduce((a, [, v]) => a + v, 0),
        2,
      ),
      rpc: {
        worker: { calls: sum(measured.rpc.worker), perCompleted: per(sum(measured.rpc.worker)), byMethod: measured.rpc.worker },
        web: { calls: sum(measured.rpc.web), perCompleted: per(sum(measured.rpc.web)), byMethod: measured.rpc.web },
        idle: { seconds: options.idleSeconds, worker: sum(idle), perMinute: round((sum(idle) * 60) / Math.max(1, options.idleSeconds), 1), byMethod: idle },
      },
      profiled: { completedPerSecond: round(profiled.completed / profiled.seconds, 1), walletsPaidTwice: profiled.onChain.walletsPaidTwice },
      profiles: profiled.profiles,
    };
  } finally {
    for (const p of opened) await p.close().catch(() => {});
    await stack.stop();
  }
}

export function renderEndToEnd(e: EndToEndResult): string {
  const cpu = Object.entries(e.cpuMsPerCompleted)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const methods = (m: Record<string, number>, per = 1) =>
    Object.entries(m)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${round(v / per, 2)}`)
      .join(", ") || "none";
  const done = Math.max(1, e.statuses.completed ?? 0);
  return [
    `## End-to-end burst (${e.clients} clients, each registers then requests; ${e.requests} sponsorships after ${e.warmup ?? 0} to warm up, ${e.blockTime}-s blocks)`,
    "",
    "| | |",
    "|---|---|",
    `| completed/s (first registration to last completion) | **${e.completedPerSecond}** (${e.seconds} s) |`,
    `| request -> completed p50 / p95 / p99 / max ms | ${e.latencyMs.p50} / ${e.latencyMs.p95} / ${e.latencyMs.p99} / ${e.latencyMs.max} |`,
    `| statuses | ${Object.entries(e.statuses)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}; relay attempts ${e.relayAttempts} |`,
    `| on chain | ${e.onChain.sponsoredEvents} Sponsored events, ${e.onChain.walletsPaidTwice} wallets paid twice |`,
    `| CPU ms per completed sponsorship | **${e.cpuMsPerCompletedTotal}** without the load generator: ${cpu} |`,
    `| worker JSON-RPC calls per completed sponsorship | **${e.rpc.worker.perCompleted}**: ${methods(e.rpc.worker.byMethod, done)} |`,
    `| web server JSON-RPC calls per completed sponsorship | ${e.rpc.web.perCompleted}: ${methods(e.rpc.web.byMethod, done)} |`,
    `| second burst under --cpu-prof (profiles below; its own figures are not the service's) | ${e.profiled.completedPerSecond}/s, ${e.profiled.walletsPaidTwice} wallets paid twice |`,
    `| worker JSON-RPC calls per idle minute | **${e.rpc.idle.perMinute}** (${e.rpc.idle.worker} in ${e.rpc.idle.seconds} s): ${methods(e.rpc.idle.byMethod)} |`,
    "",
    ...e.profiles.map((p) => renderProfileSummary(p.summary, p.process)),
  ].join("\n");
}
