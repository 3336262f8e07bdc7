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
import { healthy, spawnInstance, startStack } from "./stack";
import { note, percentile, randomAddress, round, waitFor, type Address } from "./util";

/**
 * The end-to-end burst (issue 15 items 1 and 3, issue 12 item 6), `BENCH_PHASES=e2e`: the shape PoWFaucet was
 * measured with. A stack at 1-s blocks; its own worker is paused (SIGSTOP) and replaced by one under
 * `node --cpu-prof` whose JSON-RPC goes through a counting proxy (test/rpc-proxy.ts), and the clients talk to a
 * second web server, also profiled, with its own counting proxy. `BENCH_E2E_CLIENTS` clients (32) each take a
 * fresh wallet, register it, then request its sponsorship, until `BENCH_REQUESTS` (1,000) are requested; the clock
 * runs from the first registration to the last completion. Reported: completed/s, request -> completed
 * percentiles, CPU ms per completed sponsorship of every process (register + request + relay + confirm), JSON-RPC
 * calls per completed sponsorship by method, then the calls of an idle minute (no requests), the chain's word (one
 * Sponsored event per request, no wallet paid twice), and the profiles' top items. The profiles are written into the
 * run's results folder (`profiles/e2e-web`, `profiles/e2e-worker`).
 */

export type EndToEndResult = {
  clients: number;
  requests: number;
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
  profiles: { process: string; summary: ProfileSummary }[];
};

const diffCounts = (after: Record<string, number>, before: Record<string, number>): Record<string, number> =>
  Object.fromEntries(Object.entries(after).flatMap(([k, v]) => (v - (before[k] ?? 0) > 0 ? [[k, v - (before[k] ?? 0)] as const] : [])));

export async function runEndToEnd(options: { logDir: string; requests: number; clients: number; idleSeconds: number }): Promise<EndToEndResult> {
  const stack = await startStack({ name: "e2e", blockTime: 1, logDir: options.logDir });
  const proxies: CountingRpcProxy[] = [];
  const instances: { stop(): Promise<void> }[] = [];
  try {
    const workerProxy = await startCountingRpcProxy(stack.rpcUrl!);
    const webProxy = await startCountingRpcProxy(stack.rpcUrl!);
    proxies.push(workerProxy, webProxy);
    const profiles = { web: path.join(options.logDir, "profiles", "e2e-web"), worker: path.join(options.logDir, "profiles", "e2e-worker") };
    for (const dir of Object.values(profiles)) mkdirSync(dir, { recursive: true });
    const prof = (dir: string) => ({ nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`] });

    // The stack's own worker steps aside; the profiled one takes every relayer once the paused one's leases lapse.
    stack.pauseWorker();
    const port = await freePort();
    const web = spawnInstance(stack, "web", { PORT: String(port), RPC_URL: webProxy.url }, options.logDir, prof(profiles.web));
    instances.push(web);
    const worker = spawnInstance(stack, "worker", { RPC_URL: workerProxy.url }, options.logDir, prof(profiles.worker));
    instances.push(worker);
    const url = `http://127.0.0.1:${port}`;
    await waitFor("the profiled web server", async () => ((await healthy(url)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    const sql = postgres(stack.databaseUrl!, { max: 2, onnotice: () => {} });
    try {
      note(`e2e: waiting for the profiled worker (pid ${worker.pid}) to hold every relayer`);
      await waitFor(
        "the profiled worker to lease every relayer",
        async () => {
          const rows = await sql<{ mine: number; total: number }[]>`
            SELECT count(*) FILTER (WHERE lease_owner LIKE ${`%:${worker.pid}:%`} AND lease_expires_at > now())::int AS mine,
                   count(*)::int AS total FROM relayer_accounts`;
          return rows[0] && rows[0].total > 0 && rows[0].mine === rows[0].total ? true : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );

      const cpu = withExtraPids(stack.cpu!, { web: () => [web.pid], worker: () => [worker.pid] });
      const n = options.requests;
      const wallets = Array.from({ length: n }, () => randomAddress() as Address);
      const startBlock = BigInt(await rpc<Hex>(stack.rpcUrl!, "eth_blockNumber"));
      note(`e2e: ${options.clients} clients, each registers a fresh wallet then requests, ${n} in all`);
      const rpcBefore = { worker: workerProxy.byMethod(), web: webProxy.byMethod() };
      const cpuBefore = snapshotCpu(cpu);
      const t0 = Date.now();
      const ids: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: options.clients }, async () => {
          for (let i = next++; i < n; i = next++) {
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
      const cpuMs = cpuBetween(cpuBefore, cpu);
      const rpcAfter = { worker: workerProxy.byMethod(), web: webProxy.byMethod() };
      const rows = await sql<{ status: string; requested_at: Date; completed_at: Date | null }[]>`
        SELECT status, requested_at, completed_at FROM sponsorship_requests WHERE id = ANY(${ids}::uuid[])`;
      const [attempts] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM relay_transactions WHERE sponsorship_request_id = ANY(${ids}::uuid[])`;
      const completed = rows.filter((r) => r.status === "completed" && r.completed_at);
      const last = Math.max(...completed.map((r) => r.completed_at!.getTime()));
      const seconds = (last - t0) / 1000;
      const latencies = completed.map((r) => r.completed_at!.getTime() - r.requested_at.getTime());
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

      // An idle minute: nothing requested; what the worker still asks the chain.
      note(`e2e: ${completed.length} completed in ${round(seconds, 1)} s; counting the worker's JSON-RPC calls over ${options.idleSeconds} idle s`);
      await new Promise((r) => setTimeout(r, 5_000));
      const idleBefore = workerProxy.byMethod();
      await new Promise((r) => setTimeout(r, options.idleSeconds * 1000));
      const idleByMethod = diffCounts(workerProxy.byMethod(), idleBefore);
      const idleCalls = Object.values(idleByMethod).reduce((a, b) => a + b, 0);

      const per = (x: number) => round(x / Math.max(1, completed.length), 2);
      const workerByMethod = diffCounts(rpcAfter.worker, rpcBefore.worker);
      const webByMethod = diffCounts(rpcAfter.web, rpcBefore.web);
      const sum = (m: Record<string, number>) => Object.values(m).reduce((a, b) => a + b, 0);
      const cpuPer = Object.fromEntries(Object.entries(cpuMs).map(([k, v]) => [k, per(v)]));

      // Stopping (SIGTERM) writes the profiles.
      for (const i of instances.splice(0)) await i.stop();
      stack.resumeWorker();
      const summaries = [
        ...summariseProfiles(profiles.web, stack.root).map((summary) => ({ process: "web server", summary })),
        ...summariseProfiles(profiles.worker, stack.root).map((summary) => ({ process: "worker", summary })),
      ];
      return {
        clients: options.clients,
        requests: n,
        blockTime: 1,
        seconds: round(seconds, 2),
        completedPerSecond: round(completed.length / seconds, 1),
        latencyMs: { p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99), max: Math.max(...latencies) },
        statuses,
        relayAttempts: attempts?.n ?? 0,
        onChain: { sponsoredEvents: events, walletsPaidTwice: [...paid.values()].filter((c) => c > 1).length },
        cpuMsPerCompleted: cpuPer,
        cpuMsPerCompletedTotal: round(
          Object.entries(cpuPer)
            .filter(([k]) => k !== "bench")
            .reduce((a, [, v]) => a + v, 0),
          2,
        ),
        rpc: {
          worker: { calls: sum(workerByMethod), perCompleted: per(sum(workerByMethod)), byMethod: workerByMethod },
          web: { calls: sum(webByMethod), perCompleted: per(sum(webByMethod)), byMethod: webByMethod },
          idle: { seconds: options.idleSeconds, worker: idleCalls, perMinute: round((idleCalls * 60) / options.idleSeconds, 1), byMethod: idleByMethod },
        },
        profiles: summaries,
      };
    } finally {
      await sql.end({ timeout: 5 });
    }
  } finally {
    for (const i of instances.splice(0)) await i.stop().catch(() => {});
    for (const p of proxies) await p.close().catch(() => {});
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
    `## End-to-end burst (${e.clients} clients, each registers then requests; ${e.requests} sponsorships, ${e.blockTime}-s blocks)`,
    "",
    "| | |",
    "|---|---|",
    `| completed/s (first registration to last completion) | **${e.completedPerSecond}** (${e.seconds} s) |`,
    `| request -> completed p50 / p95 / p99 / max ms | ${e.latencyMs.p50} / ${e.latencyMs.p95} / ${e.latencyMs.p99} / ${e.latencyMs.max} |`,
    `| statuses | ${Object.entries(e.statuses).map(([k, v]) => `${k} ${v}`).join(", ")}; relay attempts ${e.relayAttempts} |`,
    `| on chain | ${e.onChain.sponsoredEvents} Sponsored events, ${e.onChain.walletsPaidTwice} wallets paid twice |`,
    `| CPU ms per completed sponsorship | **${e.cpuMsPerCompletedTotal}** without the load generator: ${cpu} |`,
    `| worker JSON-RPC calls per completed sponsorship | **${e.rpc.worker.perCompleted}**: ${methods(e.rpc.worker.byMethod, done)} |`,
    `| web server JSON-RPC calls per completed sponsorship | ${e.rpc.web.perCompleted}: ${methods(e.rpc.web.byMethod, done)} |`,
    `| worker JSON-RPC calls per idle minute | **${e.rpc.idle.perMinute}** (${e.rpc.idle.worker} in ${e.rpc.idle.seconds} s): ${methods(e.rpc.idle.byMethod)} |`,
    "",
    ...e.profiles.map((p) => renderProfileSummary(p.summary, p.process)),
  ].join("\n");
}
