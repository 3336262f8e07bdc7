import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import type { Database } from "@/db/client";
import * as schema from "@/db/schema";
import { runEndpoint, type HttpResult } from "./http";
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
};

type Captured = { query: string; params: unknown[] };

/** The SQL each read endpoint runs, captured from lib/sponsorship/reads.ts with the given arguments. */
async function captureReadQueries(url: string, sample: { id: string; wallet: string; hash: string | undefined }): Promise<{ name: string; queries: Captured[] }[]> {
  const client = postgres(url, { max: 1, onnotice: () => {} });
  let captured: Captured[] = [];
  const db = drizzle({ client, schema, logger: { logQuery: (query, params) => captured.push({ query, params }) } }) as unknown as Database;
  const reads = await import("@/lib/sponsorship/reads");
  const out: { name: string; queries: Captured[] }[] = [];
  const capture = async (name: string, run: () => Promise<unknown>) => {
    captured = [];
    await run().catch(() => {});
    out.push({ name, queries: captured });
  };
  try {
    await capture("GET /sponsorship/:id", () => reads.getSponsorshipRequest(db, sample.id));
    await capture("GET /wallets/:address/history", () =>
      reads.getWalletHistory(db, sample.wallet as `0x${string}`, { cursor: undefined, limit: 50 }),
    );
    if (sample.hash) await capture("GET /sponsorship/tx/:hash", () => reads.getSponsorshipRequestByTransactionHash(db, sample.hash!));
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
      const reads: HttpResult[] = [];
      reads.push(
        await runEndpoint(
          options.baseUrl,
          { name: "sponsorship-by-id", method: "GET", path: "/sponsorship/:id", next: (n) => ({ path: `/sponsorship/${pick(sample.ids, n)}` }) },
          { connections: options.connections, seconds: options.seconds, warmupSeconds: 2 },
        ),
      );
      reads.push(
        await runEndpoint(
          options.baseUrl,
          {
            name: "wallet-history",
            method: "GET",
            path: "/wallets/:address/history",
            next: (n) => ({ path: `/wallets/${pick(sample.wallets, n)}/history` }),
          },
          { connections: options.connections, seconds: options.seconds, warmupSeconds: 2 },
        ),
      );
      reads.push(
        await runEndpoint(
          options.baseUrl,
          {
            name: "sponsorship-by-hash",
            method: "GET",
            path: "/sponsorship/tx/:hash",
            next: (n) => ({ path: `/sponsorship/tx/${pick(sample.hashes, n)}` }),
          },
          { connections: options.connections, seconds: options.seconds, warmupSeconds: 2 },
        ),
      );

      const plans: GrowthLevel["plans"] = [];
      const captured = await captureReadQueries(options.databaseUrl, { id: sample.ids[0]!, wallet: sample.wallets[0]!, hash: sample.hashes[0] });
      for (const endpoint of captured) {
        for (const [i, q] of endpoint.queries.entries()) {
          const plan = await explain(sql, q);
          const seqScans = [...plan.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]!);
          plans.push({ name: `${endpoint.name} #${i + 1}`, query: q.query, plan, usesIndex: /Index (Only )?Scan/.test(plan), seqScans });
        }
      }
      results.push({ rows, seedSeconds, reads, plans });
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
  return results;
}
