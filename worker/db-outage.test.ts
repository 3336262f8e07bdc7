import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { startTcpRelay, type TcpRelay } from "@/test/tcp-relay";
import {
  createRequests,
  spawnWorker,
  stopSpawned,
  waitFor,
  waitTerminal,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * Issue 4 "RPC or database outages are waited out with backoff, and logged": the worker reaches PostgreSQL
 * through a TCP relay the test can cut (every connection dropped, new ones refused) and restore, so the outage is
 * a real network failure of the real database. After it, the worker's LISTEN works again (a request is picked up
 * at once although the poll interval is a minute away).
 */

let fx: PipelineFixture;
let worker: SpawnedWorker | undefined;
let relay: TcpRelay;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

/** A worker process reaching PostgreSQL through the relay (the one before stopped first); its log tail on failure. */
async function spawnBehindRelay(env: Record<string, string>): Promise<SpawnedWorker> {
  if (worker) await stopSpawned(worker);
  const url = new URL(fx.database.url);
  url.port = String(relay.port);
  const spawned = spawnWorker(fx, { DATABASE_URL: url.toString(), ...env });
  worker = spawned;
  onTestFailed(() => {
    process.stderr.write(spawned.output().split("\n").slice(-60).join("\n"));
  });
  return spawned;
}

beforeAll(async () => {
  const url = new URL(fx.database.url);
  relay = await startTcpRelay({ host: url.hostname, port: Number(url.port) });
});

afterAll(async () => {
  if (worker) await stopSpawned(worker);
  await relay?.close();
});

describe("a database outage", () => {
  it("is waited out and logged; requests created meanwhile complete afterwards, and wake-ups work again", async () => {
    const spawned = await spawnBehindRelay({ WORKER_INTERVAL_MS: "60000" });

    const first = await createRequests(fx, 3);
    expect(
      await waitTerminal(
        fx,
        first.map((r) => r.id),
        30_000,
      ),
    ).toEqual({ completed: 3 });

    await relay.cut();
    const during = await createRequests(fx, 3);
    await waitFor("the worker to log the outage", async () => spawned.output().includes('"msg":"database unavailable, backing off"'), 30_000);
    // The outage lasts 5 s from here (a condition of the test, not a wait for the worker).
    const cutAt = Date.now();
    await waitFor("5 s of outage", async () => Date.now() - cutAt >= 5_000, 10_000, 250);
    await relay.restore();

    // Picked up after the outage (the worker scans the queue when it recovers, LISTEN or not).
    expect(
      await waitTerminal(
        fx,
        during.map((r) => r.id),
        60_000,
      ),
    ).toEqual({ completed: 3 });
    await waitFor("the worker to log its recovery", async () => spawned.output().includes('"msg":"worker recovered"'), 30_000);

    // LISTEN was set up again: a new request is handled long before the 60-second poll.
    await waitFor("LISTEN to be set up again", async () => spawned.output().split('"msg":"listening for wake-ups"').length - 1 >= 2, 30_000);
    const created = Date.now();
    const after = await createRequests(fx, 1);
    expect(
      await waitTerminal(
        fx,
        after.map((r) => r.id),
        30_000,
      ),
    ).toEqual({ completed: 1 });
    expect(Date.now() - created).toBeLessThan(30_000);

    const attempts = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM relay_transactions WHERE relay_attempt > 1`);
    expect(attempts[0]!.n).toBe(0);
  }, 180_000);

  it("is backed off more and more, and not reported recovered while it lasts, whatever the batch window", async () => {
    // A window far longer than the first backoff steps: a retry must still run the failed stage, not skip it.
    const spawned = await spawnBehindRelay({ WORKER_INTERVAL_MS: "60000", WORKER_BATCH_WINDOW_MS: "10000" });
    // A queue pass just ran (this request's), so the outage starts inside its window.
    const [request] = await createRequests(fx, 1);
    expect(await waitTerminal(fx, [request!.id], 30_000)).toEqual({ completed: 1 });
    await relay.cut();
    const cutAt = spawned.output().length;
    const since = () => spawned.output().slice(cutAt);
    // 250, 500, 1000 ms: the fourth consecutive failure comes about 2 s after the first.
    await waitFor("four consecutive failures", async () => since().includes('"consecutiveFailures":4'), 30_000);
    expect(since()).not.toContain('"msg":"worker recovered"');
    await relay.restore();
    await waitFor("the worker to log its recovery", async () => since().includes('"msg":"worker recovered"'), 30_000);
  }, 120_000);

  it("keeps one LISTEN however many outages it survives: each recovery sets it up once more, not once more per outage before", async () => {
    const spawned = await spawnBehindRelay({ WORKER_INTERVAL_MS: "60000" });
    const listening = (text: string) => text.split('"msg":"listening for wake-ups"').length - 1;
    let lastRound = "";
    for (let round = 0; round < 3; round++) {
      const [request] = await createRequests(fx, 1);
      expect(await waitTerminal(fx, [request!.id], 30_000)).toEqual({ completed: 1 });
      await relay.cut();
      const cutAt = spawned.output().length;
      const since = () => spawned.output().slice(cutAt);
      await waitFor("the worker to see the outage", async () => since().includes('"msg":"database unavailable, backing off"'), 30_000);
      await relay.restore();
      await waitFor(
        "the worker to recover and listen again",
        async () => {
          const text = since();
          const recovered = text.indexOf('"msg":"worker recovered"');
          return recovered >= 0 && listening(text.slice(recovered)) > 0;
        },
        30_000,
      );
      // Woken by a NOTIFY (the poll is a minute away): the LISTEN works.
      const [after] = await createRequests(fx, 1);
      expect(await waitTerminal(fx, [after!.id], 30_000)).toEqual({ completed: 1 });
      lastRound = since();
    }
    // Before, postgres.js brought back every listener an earlier set-up had left, one line each: four here.
    expect(listening(lastRound)).toBeLessThanOrEqual(2);
  }, 180_000);
});
