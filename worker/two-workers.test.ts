import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import {
  chainNonces,
  createRequests,
  readSponsoredEvents,
  spawnWorker,
  stopSpawned,
  waitFor,
  waitTerminal,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * Issue 4 "Two workers over 200 requests": two real worker processes on the same database and chain (one-second
 * blocks, four relayer keys shared between them by lease) never process a request twice.
 */

let fx: PipelineFixture;
const workers: SpawnedWorker[] = [];

setUpPipelineFixture({ blockTime: 1, relayers: 4 }, (started) => (fx = started));

beforeAll(async () => {});

afterAll(async () => {
  for (const w of workers) await stopSpawned(w);
});

describe("two workers at once", () => {
  it("complete each of 200 requests exactly once, on-chain and in the database", async () => {
    workers.push(spawnWorker(fx), spawnWorker(fx));
    onTestFailed(() => {
      for (const w of workers) process.stderr.write(`--- worker ${w.pid}\n${w.output().split("\n").slice(-60).join("\n")}\n`);
    });
    // Both alive and sharing the relayers (two leases each) before the requests arrive.
    await waitFor(
      "both workers to hold two relayer leases each",
      async () => {
        const rows = await fx.database.db.execute<{ owner: string; n: number }>(
          sql`SELECT lease_owner AS owner, count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL GROUP BY lease_owner`,
        );
        return rows.length === 2 && rows.every((r) => r.n === 2);
      },
      30_000,
    );

    const requests = await createRequests(fx, 200);
    const ids = requests.map((r) => r.id);
    const counts = await waitTerminal(fx, ids, 120_000);
    expect(counts).toEqual({ completed: 200 });

    // The chain's own count: one Sponsored event per request, none twice, each paying its own wallet.
    const events = (await readSponsoredEvents(fx)).filter((e) => e.requestId !== null && ids.includes(e.requestId));
    expect(events).toHaveLength(200);
    expect(new Set(events.map((e) => e.requestId)).size).toBe(200);
    const walletOf = new Map(requests.map((r) => [r.id, r.wallet]));
    for (const e of events) expect(e.wallet).toBe(walletOf.get(e.requestId!));

    // The database's: exactly one confirmed relay per request, and its hash is the one the chain reports.
    const confirmed = await fx.database.db.execute<{ request: string; hash: string }>(
      sql`SELECT sponsorship_request_id AS request, transaction_hash AS hash FROM relay_transactions WHERE status = 'confirmed'`,
    );
    expect(confirmed).toHaveLength(200);
    const hashOf = new Map(confirmed.map((c) => [c.request, c.hash]));
    for (const e of events) expect(hashOf.get(e.requestId!)).toBe(e.transactionHash);

    // Each status change happened once (the audit trail), and both workers took part.
    const transitions = await fx.database.db.execute<{ to: string; n: number; actors: number }>(
      sql`SELECT to_status AS to, count(*)::int AS n, count(DISTINCT actor)::int AS actors FROM request_events
          WHERE from_status IS NOT NULL GROUP BY to_status`,
    );
    expect(Object.fromEntries(transitions.map((t) => [t.to, t.n]))).toEqual({ approved: 200, relayed: 200, completed: 200 });
    const relayActors = await fx.database.db.execute<{ actor: string }>(sql`SELECT DISTINCT actor FROM request_events WHERE to_status = 'relayed'`);
    expect(relayActors.length).toBe(2);
  }, 180_000);

  it("finish every request exactly once when one of them is killed (kill -9) halfway: the other takes its relayers over", async () => {
    for (const w of workers.splice(0)) await stopSpawned(w);
    const a = spawnWorker(fx);
    const b = spawnWorker(fx);
    workers.push(a, b);
    onTestFailed(() => {
      for (const w of [a, b]) process.stderr.write(`--- worker ${w.pid}\n${w.output().split("\n").slice(-60).join("\n")}\n`);
    });
    await waitFor(
      "both workers to hold two relayer leases each",
      async () => {
        const rows = await fx.database.db.execute<{ n: number }>(
          sql`SELECT count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL GROUP BY lease_owner`,
        );
        return rows.length === 2 && rows.every((r) => r.n === 2);
      },
      30_000,
    );

    const requests = await createRequests(fx, 200);
    const ids = requests.map((r) => r.id);
    await waitFor(
      "some requests to be relayed by each worker",
      async () => {
        const rows = await fx.database.db.execute<{ n: number }>(
          sql`SELECT count(DISTINCT actor)::int AS n FROM request_events WHERE to_status = 'relayed' AND sponsorship_request_id IN (${sql.join(
            ids.map((id) => sql`${id}::uuid`),
            sql`, `,
          )})`,
        );
        return rows[0]!.n === 2;
      },
      60_000,
    );
    a.process.kill("SIGKILL");
    expect((await a.exited).signal).toBe("SIGKILL");

    expect(await waitTerminal(fx, ids, 120_000)).toEqual({ completed: 200 });
    const events = (await readSponsoredEvents(fx)).filter((e) => e.requestId !== null && ids.includes(e.requestId));
    expect(events).toHaveLength(200);
    expect(new Set(events.map((e) => e.requestId)).size).toBe(200);
    const confirmed = await fx.database.db.execute<{ n: number; requests: number }>(
      sql`SELECT count(*)::int AS n, count(DISTINCT sponsorship_request_id)::int AS requests FROM relay_transactions
          WHERE status = 'confirmed' AND sponsorship_request_id IN (${sql.join(
            ids.map((id) => sql`${id}::uuid`),
            sql`, `,
          )})`,
    );
    expect(confirmed[0]).toEqual({ n: 200, requests: 200 });
    // The survivor holds every relayer now, and no nonce is left open on any of them.
    expect(b.output()).toContain('"msg":"relayer lease acquired"');
    // (Its leases expire on their own clock: the requests may all be done before the last of them is taken over.)
    const owners = await waitFor(
      "the survivor to hold every relayer",
      async () => {
        const rows = await fx.database.db.execute<{ owner: string | null; n: number }>(
          sql`SELECT lease_owner AS owner, count(*)::int AS n FROM relayer_accounts GROUP BY lease_owner`,
        );
        return rows.length === 1 ? rows : undefined;
      },
      60_000,
    );
    expect(owners).toHaveLength(1);
    expect(owners[0]!.n).toBe(4);
    const accounts = await fx.database.db.execute<{ address: `0x${string}`; next: string }>(sql`SELECT address, next_nonce AS next FROM relayer_accounts`);
    for (const account of accounts) {
      const n = Number(account.next);
      expect(await chainNonces(fx, account.address)).toEqual({ latest: n, pending: n });
    }
  }, 180_000);
});
