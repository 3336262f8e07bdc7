import postgres from "postgres";
import type { Hex } from "viem";
import { requestIdHash } from "@/lib/chain/ids";
import { sponsoredTopic } from "./ceiling";
import { registerWallet, requestSponsorship } from "./api";
import { cpuBetween, snapshotCpu, type CpuGroups } from "./cpu";
import { rpc } from "./rpc";
import { mapConcurrent, note, percentile, randomAddress, waitFor, type Address } from "./util";

/**
 * The pipeline end to end: N fresh wallets registered, then N sponsorship requests through the API (all at
 * once, or paced at a steady rate), and the clock stops when the last one is completed. Latency per request is
 * completedAt - requestedAt as the database recorded them. Afterwards the chain is asked: exactly one Sponsored
 * event per request, no wallet paid twice.
 */

export type PipelineResult = {
  mode: "burst" | "paced";
  requests: number;
  offeredPerSecond: number | null;
  /** Requests in flight at most ("burst"). */
  concurrency: number | null;
  submitSeconds: number;
  /** First requestedAt to last completedAt. */
  totalSeconds: number;
  completedPerSecond: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
  stageMsP50: { review: number; queue: number; confirm: number };
  statuses: Record<string, number>;
  relayAttempts: { total: number; maxPerRequest: number };
  onChain: { sponsoredEvents: number; distinctWallets: number; walletsPaidTwice: number; unexpected: number };
  gasUsed: { mean: number; min: number; max: number } | null;
  /** CPU milliseconds per request by part of the stack, submission to last completion. */
  cpuMsPerRequest?: Record<string, number>;
};

const DEFAULT_BURST_CONCURRENCY = 256;

type Row = {
  id: string;
  status: string;
  requested_at: Date;
  approved_at: Date | null;
  relayed_at: Date | null;
  completed_at: Date | null;
};

export async function measurePipeline(options: {
  baseUrls: readonly string[];
  databaseUrl: string;
  rpcUrl: string;
  treasury: Address;
  requests: number;
  mode: "burst" | "paced";
  /** Requests per second in paced mode. */
  rate?: number;
  concurrency?: number;
  cpu?: CpuGroups;
}): Promise<PipelineResult> {
  const { baseUrls, requests: n } = options;
  const sql = postgres(options.databaseUrl, { max: 2, onnotice: () => {} });
  try {
    const wallets = Array.from({ length: n }, () => randomAddress());
    const urlFor = (i: number) => baseUrls[i % baseUrls.length]!;
    note(`pipeline (${options.mode}): registering ${n} wallets`);
    await mapConcurrent(wallets, 32, (w, i) => registerWallet(urlFor(i), w));
    const startBlock = BigInt(await rpc<Hex>(options.rpcUrl, "eth_blockNumber"));

    note(`pipeline (${options.mode}): submitting ${n} requests${options.mode === "paced" ? ` at ${options.rate}/s` : ""}`);
    const cpuBefore = options.cpu ? snapshotCpu(options.cpu) : undefined;
    const t0 = performance.now();
    let ids: string[];
    if (options.mode === "burst") {
      ids = await mapConcurrent(wallets, options.concurrency ?? DEFAULT_BURST_CONCURRENCY, (w, i) => requestSponsorship(urlFor(i), w));
    } else {
      const rate = options.rate ?? 200;
      ids = await Promise.all(
        wallets.map(async (w, i) => {
          const due = t0 + (i * 1000) / rate;
          const wait = due - performance.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          return requestSponsorship(urlFor(i), w);
        }),
      );
    }
    const submitSeconds = (performance.now() - t0) / 1000;

    note(`pipeline (${options.mode}): waiting for ${n} requests to finish`);
    await waitFor(
      "every request to reach a terminal status",
      async () => {
        const [r] = await sql<{ open: number }[]>`
          SELECT count(*)::int AS open FROM sponsorship_requests
          WHERE id = ANY(${ids}::uuid[]) AND status IN ('pending', 'approved', 'relayed')`;
        return r && r.open === 0 ? true : undefined;
      },
      { timeoutMs: 10 * 60_000, intervalMs: 100 },
    );
    const cpuMs = cpuBefore && options.cpu ? cpuBetween(cpuBefore, options.cpu) : undefined;
    const rows = await sql<Row[]>`
      SELECT id, status, requested_at, approved_at, relayed_at, completed_at
      FROM sponsorship_requests WHERE id = ANY(${ids}::uuid[])`;
    const relays = await sql<{ request: string; attempts: number; gas: string | null }[]>`
      SELECT sponsorship_request_id AS request, count(*)::int AS attempts,
             max(gas_used) FILTER (WHERE status = 'confirmed')::text AS gas
      FROM relay_transactions WHERE sponsorship_request_id = ANY(${ids}::uuid[])
      GROUP BY sponsorship_request_id`;
    const endBlock = BigInt(await rpc<Hex>(options.rpcUrl, "eth_blockNumber"));

    const statuses: Record<string, number> = {};
    for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const completed = rows.filter((r) => r.status === "completed" && r.completed_at);
    const latencies = completed.map((r) => r.completed_at!.getTime() - r.requested_at.getTime());
    const first = Math.min(...rows.map((r) => r.requested_at.getTime()));
    const last = Math.max(...completed.map((r) => r.completed_at!.getTime()));
    const diff = (a: Date | null, b: Date | null) => (a && b ? b.getTime() - a.getTime() : undefined);
    const stage = (f: (r: Row) => number | undefined) =>
      percentile(
        completed.map(f).filter((v): v is number => v !== undefined),
        50,
      );
    const gas = relays.map((r) => (r.gas ? Number(r.gas) : NaN)).filter((g) => Number.isFinite(g));

    // The chain's word: Sponsored events of this run's request ids (each event carries the hash of its id).
    const logs = await rpc<{ topics: Hex[] }[]>(options.rpcUrl, "eth_getLogs", [
      { address: options.treasury, fromBlock: `0x${(startBlock + 1n).toString(16)}`, toBlock: `0x${endBlock.toString(16)}`, topics: [sponsoredTopic()] },
    ]);
    const wanted = new Set(ids.map((id) => requestIdHash(id)));
    const ourWallets = new Set(wallets.map((w) => w.toLowerCase()));
    const paid = new Map<string, number>();
    let events = 0;
    let unexpected = 0;
    for (const log of logs) {
      const wallet = `0x${(log.topics[1] ?? "").slice(26)}`.toLowerCase();
      const idHash = (log.topics[2] ?? "").toLowerCase();
      if (!ourWallets.has(wallet)) continue;
      events += 1;
      if (!wanted.has(idHash as Hex)) unexpected += 1;
      paid.set(wallet, (paid.get(wallet) ?? 0) + 1);
    }

    return {
      mode: options.mode,
      requests: n,
      offeredPerSecond: options.mode === "paced" ? (options.rate ?? 200) : null,
      concurrency: options.mode === "burst" ? (options.concurrency ?? DEFAULT_BURST_CONCURRENCY) : null,
      submitSeconds,
      totalSeconds: (last - first) / 1000,
      completedPerSecond: completed.length / ((last - first) / 1000),
      latencyMs: {
        p50: percentile(latencies, 50),
        p95: percentile(latencies, 95),
        p99: percentile(latencies, 99),
        max: Math.max(...latencies),
      },
      stageMsP50: {
        review: stage((r) => diff(r.requested_at, r.approved_at)),
        queue: stage((r) => diff(r.approved_at, r.relayed_at)),
        confirm: stage((r) => diff(r.relayed_at, r.completed_at)),
      },
      statuses,
      relayAttempts: { total: relays.reduce((a, r) => a + r.attempts, 0), maxPerRequest: Math.max(0, ...relays.map((r) => r.attempts)) },
      onChain: {
        sponsoredEvents: events,
        distinctWallets: paid.size,
        walletsPaidTwice: [...paid.values()].filter((c) => c > 1).length,
        unexpected,
      },
      ...(cpuMs ? { cpuMsPerRequest: Object.fromEntries(Object.entries(cpuMs).map(([k, v]) => [k, Math.round((v / n) * 100) / 100])) } : {}),
      gasUsed: gas.length ? { mean: gas.reduce((a, b) => a + b, 0) / gas.length, min: Math.min(...gas), max: Math.max(...gas) } : null,
    };
  } finally {
    await sql.end({ timeout: 5 });
  }
}
