import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import type { Database } from "@/db/client";
import * as schema from "@/db/schema";
import { runInterleaved, type Endpoint, type HttpResult } from "./http";
import { growRequests, sampleSeeded } from "./seed";
import { note } from "./util";

/**
 * Growth: the read endpoints' latency with 1k, 100k and 1M requests in the tables, and the plans of the very
 * queries the endpoints run (captured from the domain's read functions through a logging Drizzle instance,
 * then run under EXPLAIN (ANALYZE, BUFFERS)).
 */

export type GrowthLevel = {
  rows: number;
  seedSeconds: number;
  reads: HttpResult[];
  plans: { name: string; query: string; plan: string; usesIndex: boolean; seqScans: string[] }[];
  /** Per statement: its time in the database over 2,000 different rows (ms). */
  queryMs: { name: string; p50: number; p99: number }[];
};

type Captured = { query: string; params: unknown[] };

/**
 * The SQL each read endpoint runs, captured from lib/sponsorship/reads.ts with the given arguments: every
 * statement passes through postgres.js's `unsafe` (Drizzle's execute and the prepared-statement helper alike),
 * so a client whose `unsafe` records its arguments sees them all.
 */
async function captureReadQueries(
  url: string,
  sample: { id: string; wallet: string; hash: string | undefined },
): Promise<{ name: string; queries: Captured[] }[]> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  let captured: Captured[] = [];
  const unsafe = client.unsafe.bind(client);
  (client as unknown as { unsafe: unknown }).unsafe = (query: string, params?: unknown[], options?: object) => {
    captured.push({ query, params: params ?? [] });
    return unsafe(query, params as never[], options as never);
  };
  const db = drizzle({ client, schema }) as unknown as Database;
  const reads = await import("@/lib/sponsorship/reads");
  const out: { name: string; queries: Captured[] }[] = [];
  const capture = async (name: string, run: () => Promise<unknown>) => {
    captured = [];
    await run().catch(() => {});
    out.push({ name, queries: captured });
  };
  try {
    await capture("GET /sponsorship/:id", () => reads.getSponsorshipRequest(db, sample.id, "service"));
    await capture("GET /wallets/:address/history", () => reads.getWalletHistory(db, sample.wallet as `0x${string}`, { cursor: undefined, limit: 50 }));
    if (sample.hash) await capture("GET /sponsorship/tx/:hash", () => reads.getSponsorshipRequestByTransactionHash(db, sample.hash!));
  } finally {
    await client.end({ timeout: 5 });
  }
  return out;
}

/**
 * The database's own time for each captured statement over many different rows (prepared, one connection, no
 * HTTP in between): what grows with the table, without the web server's noise. Milliseconds, client-measured.
 */
async function timeQueries(
  url: string,
  captured: { name: string; queries: Captured[] }[],
  sample: { ids: string[]; wallets: string[]; hashes: string[] },
  first: { id: string; wallet: string; hash: string | undefined },
  runs: number,
): Promise<{ name: string; p50: number; p99: number }[]> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  const out: { name: string; p50: number; p99: number }[] = [];
  try {
    for (const endpoint of captured) {
      for (const [i, q] of endpoint.queries.entries()) {
        // Substitute each sampled value for the one the capture used, so every run reads a different row.
        const swap = (k: number) =>
          q.params.map((p) => {
            if (p === first.id) return sample.ids[k % sample.ids.length];
            if (p === first.wallet) return sample.wallets[k % sample.wallets.length];
            if (first.hash && p === first.hash.toLowerCase()) return sample.hashes[k % sample.hashes.length];
            return p;
          });
        // Warm-up: the first executions on a connection prepare the statement and fill caches.
        for (let k = 0; k < 200; k++) await client.unsafe(q.query, swap(runs + k) as never[], { prepare: true });
        const times: number[] = [];
        for (let k = 0; k < runs; k++) {
          const t0 = performance.now();
          await client.unsafe(q.query, swap(k) as never[], { prepare: true });
          times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        out.push({
          name: `${endpoint.name} #${i + 1}`,
          p50: Math.round(times[Math.floor(runs * 0.5)]! * 1000) / 1000,
          p99: Math.round(times[Math.floor(runs * 0.99)]! * 1000) / 1000,
        });
      }
    }
  } finally {
    await client.end({ timeout: 5 });
  }
  return out;
}

async function explain(sql: postgres.Sql, q: Captured): Promise<string> {
  const rows = await sql.unsafe<{ "QUERY PLAN": string }[]>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${q.query}`, q.params as never[]);
  return rows.map((r) => r["QUERY PLAN"]).join("\n");
}

export async function measureGrowth(options: {
  baseUrl: string;
  databaseUrl: string;
  levels: readonly number[];
  connections: number;
  seconds: number;
  rounds: number;
}): Promise<GrowthLevel[]> {
  const sql = postgres(options.databaseUrl, { max: 2, onnotice: () => {} });
  const results: GrowthLevel[] = [];
  let have = 0;
  try {
    for (const rows of options.levels) {
      const t0 = performance.now();
      await growRequests(sql, have, rows);
      have = rows;
      const seedSeconds = (performance.now() - t0) / 1000;
      const sample = await sampleSeeded(sql, 5000);
      note(`growth: ${rows} requests seeded; reading`);
      const pick = <T>(list: readonly T[], n: number) => list[n % list.length]!;
      const endpoints: Endpoint[] = [
        { name: "sponsorship-by-id", method: "GET", path: "/sponsorship/:id", next: (n) => ({ path: `/sponsorship/${pick(sample.ids, n)}` }) },
        { name: "wallet-history", method: "GET", path: "/wallets/:address/history", next: (n) => ({ path: `/wallets/${pick(sample.wallets, n)}/history` }) },
        { name: "sponsorship-by-hash", method: "GET", path: "/sponsorship/tx/:hash", next: (n) => ({ path: `/sponsorship/tx/${pick(sample.hashes, n)}` }) },
      ];
      const reads = await runInterleaved(options.baseUrl, endpoints, { connections: options.connections, seconds: options.seconds, rounds: options.rounds });

      const plans: GrowthLevel["plans"] = [];
      const first = { id: sample.ids[0]!, wallet: sample.wallets[0]!, hash: sample.hashes[0] };
      const captured = await captureReadQueries(options.databaseUrl, first);
      const queryMs = await timeQueries(options.databaseUrl, captured, sample, first, 2000);
      for (const endpoint of captured) {
        for (const [i, q] of endpoint.queries.entries()) {
          const plan = await explain(sql, q);
          const seqScans = [...plan.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]!);
          plans.push({ name: `${endpoint.name} #${i + 1}`, query: q.query, plan, usesIndex: /Index (Only )?Scan/.test(plan), seqScans });
        }
      }
      results.push({ rows, seedSeconds, reads, plans, queryMs });
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  return results;
}
