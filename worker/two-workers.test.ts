import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import {
  createRequests,
  readSponsoredEvents,
  spawnWorker,
  stopSpawned,
  waitFor,
  waitTerminal,
  type PipelineFixture,
  type SpawnedWorker,
  startPipelineFixture,
} from "./test-support";

/**
 * Issue 4 "Two workers over 200 requests": two real worker processes on the same database and chain (one-second
 * blocks, four relayer keys shared between them by lease) never process a request twice.
 */

let fx: PipelineFixture;
const workers: SpawnedWorker[] = [];

beforeAll(async () => {
  fx = await startPipelineFixture({ blockTime: 1, relayers: 4 });
});

afterAll(async () => {
  for (const w of workers) await stopSpawned(w);
  await fx?.stop();
});

describe("two workers at once", () => {
  it("complete each of 200 requests exactly once, on-chain and in the database", async () => {
    workers.push(spawnWorker(fx), spawnWorker(fx));
    onTestFailed(() => {
      for (const w of workers) process.stderr.write(`--- worker ${w.pid}\n${w.output().split("\n").slice(-60).join("\n")}\n`);
    });
    // Both alive and sharing the relayers (two leases each) before the requests arrive.
    await waitFor("both workers to hold two relayer leases each", async () => {
      const rows = await fx.database.db.execute<{ owner: string; n: number }>(
        sql`SELECT lease_owner AS owner, count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL GROUP BY lease_owner`,
      );
      return rows.length === 2 && rows.every((r) => r.n === 2);
    }, 30_000);

    const requests = await createRequests(fx, 200);
    const ids = requests.map((r) => r.id);
    const counts = await waitTerminal(fx, ids, 120_000);
    expect(counts).toEqual({ completed: 200 });

    // The chain's own count: one Sponsored event per request, none twice, each paying its own wallet.
    const events = (await readSponsoredEvents(fx)).filter((e) => ids.includes(e.requestId));
    expect(events).toHaveLength(200);
    expect(new Set(events.map((e) => e.requestId)).size).toBe(200);
    const walletOf = new Map(requests.map((r) => [r.id, r.wallet]));
    for (const e of events) expect(e.wallet).toBe(walletOf.get(e.requestId));

    // The database's: exactly one confirmed relay per request, and its hash is the one the chain reports.
    const confirmed = await fx.database.db.execute<{ request: string; hash: string }>(
      sql`SELECT sponsorship_request_id AS request, transaction_hash AS hash FROM relay_transactions WHERE status = 'confirmed'`,
    );
    expect(confirmed).toHaveLength(200);
    const hashOf = new Map(confirmed.map((c) => [c.request, c.hash]));
    for (const e of events) expect(hashOf.get(e.requestId)).toBe(e.transactionHash);

    // Each status change happened once (the audit trail), and both workers took part.
    const transitions = await fx.database.db.execute<{ to: string; n: number; actors: number }>(
      sql`SELECT to_status AS to, count(*)::int AS n, count(DISTINCT actor)::int AS actors FROM request_events
          WHERE from_status IS NOT NULL GROUP BY to_status`,
    );
    expect(Object.fromEntries(transitions.map((t) => [t.to, t.n]))).toEqual({ approved: 200, relayed: 200, completed: 200 });
    const relayActors = await fx.database.db.execute<{ actor: string }>(
      sql`SELECT DISTINCT actor FROM request_events WHERE to_status = 'relayed'`,
    );
    expect(relayActors.length).toBe(2);
  }, 180_000);
});
