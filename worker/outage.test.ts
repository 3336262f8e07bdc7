import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { workerHeartbeats } from "@/db/schema";
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
 * Issue 4 "The chain stopped for 30 seconds then back": the test's anvil is frozen (SIGSTOP: connections hang,
 * nothing answers, nothing is mined) with transactions in flight and new requests arriving, then resumed
 * (SIGCONT). The relay timeout is shorter than the outage, so an attempt would be burned if the worker counted
 * the outage against it.
 */

const OUTAGE_MS = 30_000;
let fx: PipelineFixture;
let worker: SpawnedWorker | undefined;
let frozen = false;

setUpPipelineFixture({ blockTime: 1, relayers: 2 }, (started) => (fx = started));

beforeAll(async () => {});

afterAll(async () => {
  if (frozen) process.kill(fx.anvil.pid, "SIGCONT");
  if (worker) await stopSpawned(worker);
});

type Details = { chain?: { reachable?: boolean } };

async function chainReachableInHeartbeat(): Promise<boolean | undefined> {
  const [beat] = await fx.database.db.select().from(workerHeartbeats);
  return (beat?.details as Details | undefined)?.chain?.reachable;
}

describe("a chain outage", () => {
  it("is waited out: no attempt burned, every request completes once the chain is back", async () => {
    const spawned = spawnWorker(fx, { RELAY_TIMEOUT_MS: "10000", WORKER_INTERVAL_MS: "1000" });
    worker = spawned;
    onTestFailed(() => {
      process.stderr.write(spawned.output().split("\n").slice(-80).join("\n"));
    });

    const before = await createRequests(fx, 10);
    await waitFor("the first requests to be relayed", async () => {
      const c = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM sponsorship_requests WHERE status IN ('relayed', 'completed')`);
      return c[0]!.n === 10;
    });

    process.kill(fx.anvil.pid, "SIGSTOP");
    frozen = true;
    const stoppedAt = Date.now();
    // Requests keep arriving while the chain is away (the API accepts them as pending).
    const during = await createRequests(fx, 10);
    await waitFor("the worker to notice the outage", async () => (await chainReachableInHeartbeat()) === false, OUTAGE_MS);
    // The outage lasts its full length (a deliberate condition of the test, not a wait for the worker).
    await waitFor("the outage to last 30 s", async () => Date.now() - stoppedAt >= OUTAGE_MS, OUTAGE_MS + 5_000, 500);

    const failedDuring = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM relay_transactions WHERE status = 'failed'`);
    expect(failedDuring[0]!.n).toBe(0);
    const pendingDuring = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM sponsorship_requests WHERE status = 'pending'`);
    expect(pendingDuring[0]!.n).toBe(10);

    process.kill(fx.anvil.pid, "SIGCONT");
    frozen = false;

    const ids = [...before, ...during].map((r) => r.id);
    expect(await waitTerminal(fx, ids, 90_000)).toEqual({ completed: 20 });
    // One attempt per request: nothing was burned by the outage.
    const attempts = await fx.database.db.execute<{ attempts: number; n: number }>(
      sql`SELECT relay_attempt AS attempts, count(*)::int AS n FROM relay_transactions GROUP BY relay_attempt`,
    );
    expect(attempts.map((a) => [a.attempts, a.n])).toEqual([[1, 20]]);
    await waitFor("the heartbeat to report the chain reachable", async () => (await chainReachableInHeartbeat()) === true);
    const log = spawned.output();
    expect(log).toContain('"msg":"chain unreachable"');
    expect(log).toContain('"msg":"chain reachable again"');
  }, 180_000);
});
