import { sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { workerHeartbeats } from "@/db/schema";
import { processAlive } from "@/lib/process-alive";
import { processSpace } from "./host";
import { createLogger } from "@/lib/log";
import { WorkerChain } from "./chain";
import { RelayerPool } from "./relayers";
import type { RunningWorker } from "./worker";
import { relayerAddress, startInProcessWorker, waitFor, setUpPipelineFixture, type PipelineFixture } from "@/test/worker-fixture";

/**
 * Relayer leases are shared among the live workers that hold keys for them. A live worker with other keys (or
 * none) must not shrink this worker's share, or some of its relayer accounts would sit unused.
 */

let fx: PipelineFixture;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 4 }, (started) => (fx = started));

beforeAll(async () => {});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await fx.database.db.delete(workerHeartbeats);
  await fx.database.db.execute(sql`UPDATE relayer_accounts SET lease_owner = NULL, lease_expires_at = NULL`);
});

const beats: NodeJS.Timeout[] = [];
afterEach(() => {
  for (const b of beats.splice(0)) clearInterval(b);
});

/**
 * Another worker that keeps beating (as a real one does), with the given relayer keys; by default on another host.
 * `where` puts it on this host, in another PID namespace or in ours, with a pid that does not exist here.
 */
async function otherWorker(id: string, configured: string[], where?: { pidNamespace: string | null }) {
  await fx.database.db.insert(workerHeartbeats).values({
    workerId: id,
    hostname: where ? processSpace().hostname : "another-host",
    pid: where ? deadPid() : 1,
    details: { version: 1, relayers: { configured, leased: [] }, ...(where ? { pidNamespace: where.pidNamespace } : {}) },
  });
  beats.push(setInterval(() => void fx.database.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() WHERE worker_id = ${id}`), 300));
}

/** A pid no process has here (probed). */
function deadPid(): number {
  for (let pid = 4_000_000; ; pid--) if (!processAlive(pid)) return pid;
}

/** A RelayerPool of all four keys driven by the test (no worker loop around it), beating as "pool-a". */
async function directPool(): Promise<RelayerPool> {
  const pool = new RelayerPool({
    db: fx.database.db,
    chain: new WorkerChain({ rpcUrl: fx.anvil.rpcUrl, ...fx.deployment }),
    log: createLogger({ test: "lease-share" }),
    workerId: "pool-a",
    keys: fx.relayerKeys,
    leaseTtlMs: 30_000,
  });
  const configured = fx.relayerKeys.map((k) => relayerAddress(k).toLowerCase());
  await fx.database.db.insert(workerHeartbeats).values({
    workerId: "pool-a",
    hostname: "another-host",
    pid: 1,
    details: { version: 1, relayers: { configured, leased: [] } },
  });
  await pool.register(31337);
  return pool;
}

async function leasedBy(workerId: string): Promise<number> {
  const rows = (await fx.database.db.execute(
    sql`SELECT count(*)::int AS n FROM relayer_accounts WHERE lease_owner = ${workerId} AND lease_expires_at > now()`,
  )) as unknown as [{ n: number }];
  return rows[0].n;
}

describe("relayer lease shares", () => {
  it("takes all of its relayers when the only other live worker holds no keys for them", async () => {
    await otherWorker("keyless", []);
    const w = await startInProcessWorker(fx);
    workers.push(w);
    await waitFor("all four relayers leased", async () => ((await leasedBy(w.workerId)) === 4 ? true : undefined), 8_000);
    expect(await leasedBy(w.workerId)).toBe(4);
  });

  it("leaves half of them to another live worker that holds the same keys", async () => {
    await otherWorker("twin", fx.relayerKeys.map(relayerAddress));
    const w = await startInProcessWorker(fx);
    workers.push(w);
    await waitFor("two relayers leased", async () => ((await leasedBy(w.workerId)) === 2 ? true : undefined), 8_000);
    expect(await leasedBy(w.workerId)).toBe(2);
  });

  it("leaves no relayer to nobody when two workers' keys only partly overlap (four here, one of them there)", async () => {
    const a = await startInProcessWorker(fx);
    workers.push(a);
    await waitFor("all four relayers leased by the first worker", async () => ((await leasedBy(a.workerId)) === 4 ? true : undefined), 8_000);
    // A rolling change of RELAYER_PRIVATE_KEYS: a second worker with one of the four keys (the one that sorts first).
    const first = [...fx.relayerKeys].sort((x, y) => relayerAddress(x).toLowerCase().localeCompare(relayerAddress(y).toLowerCase()))[0]!;
    const b = await startInProcessWorker(fx, { RELAYER_PRIVATE_KEYS: first });
    workers.push(b);
    // Before, the first gave back two (its share of four between two) that the second has no key for: held by nobody.
    await waitFor(
      "the second worker holds its one relayer and the first the other three",
      async () => ((await leasedBy(b.workerId)) === 1 && (await leasedBy(a.workerId)) === 3 ? true : undefined),
      15_000,
    );
    const held = (await fx.database.db.execute(
      sql`SELECT count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL AND lease_expires_at > now()`,
    )) as unknown as [{ n: number }];
    expect(held[0].n).toBe(4);
  });

  it("does not count on a live worker whose heartbeat does not say its keys (it may hold none of ours) to take any", async () => {
    // An older worker's heartbeat without its relayers: it counts in the share (as one that may hold them all), but
    // nothing is left for it to take. Before, this pool held its share of two and left the other two to nobody.
    await fx.database.db.insert(workerHeartbeats).values({ workerId: "unsaid", hostname: "another-host", pid: 1, details: { version: 1 } });
    beats.push(setInterval(() => void fx.database.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() WHERE worker_id = 'unsaid'`), 300));
    const pool = await directPool();
    await pool.rebalance();
    expect(pool.leased).toEqual(fx.relayerKeys.map((k) => relayerAddress(k).toLowerCase()).sort());
  });

  it("takes a relayer nobody else would take also while it holds more than its share", async () => {
    // Three live workers with the first key only; the first is held by one of them. This pool (all four keys) has a
    // share of one, and takes the other three: no other worker could.
    const addresses = fx.relayerKeys.map((k) => relayerAddress(k).toLowerCase()).sort();
    const firstKey = fx.relayerKeys.find((k) => relayerAddress(k).toLowerCase() === addresses[0])!;
    for (const id of ["b", "e", "f"]) await otherWorker(id, [relayerAddress(firstKey)]);
    await fx.database.db.execute(sql`
      INSERT INTO relayer_accounts (address, chain_id, lease_owner, lease_expires_at) VALUES (${addresses[0]}, 31337, 'b', now() + interval '1 hour')
      ON CONFLICT (address) DO UPDATE SET lease_owner = 'b', lease_expires_at = now() + interval '1 hour'`);
    const pool = await directPool();
    await pool.rebalance();
    expect(pool.leased).toEqual(addresses.slice(1));
    // One is given back after a failed reconciliation (or its other key holder stopped): free, and above the share
    // this pool still holds two. Before, a pool above its share with nobody to give to stopped there: the third
    // relayer stayed free for ever, and what it had sent was never settled.
    await fx.database.db.execute(sql`UPDATE relayer_accounts SET lease_owner = NULL, lease_expires_at = NULL WHERE address = ${addresses[3]}`);
    pool.drop(addresses[3] as `0x${string}`, "test: given back");
    await pool.rebalance();
    expect(pool.leased).toEqual(addresses.slice(1));
  });

  it("counts a live worker on the same hostname in another PID namespace (another container) by its beats, not by probing its pid", async () => {
    expect(processSpace().pidNamespace).not.toBeNull();
    await otherWorker("container-twin", fx.relayerKeys.map(relayerAddress), { pidNamespace: "pid:[1]" });
    const w = await startInProcessWorker(fx);
    workers.push(w);
    // Judged dead (the pid does not exist here), it would lose all four at the first rebalance, at start.
    await waitFor("two relayers leased", async () => ((await leasedBy(w.workerId)) === 2 ? true : undefined), 8_000);
    expect(await leasedBy(w.workerId)).toBe(2);
  });

  it("takes over at once from a worker whose pid is gone in its own PID namespace (a crashed process on this host)", async () => {
    await otherWorker("crashed-here", fx.relayerKeys.map(relayerAddress), { pidNamespace: processSpace().pidNamespace });
    const w = await startInProcessWorker(fx);
    workers.push(w);
    await waitFor("all four relayers leased", async () => ((await leasedBy(w.workerId)) === 4 ? true : undefined), 8_000);
    expect(await leasedBy(w.workerId)).toBe(4);
  });

  it("takes over leases the database says have run out, whatever this worker's wall clock says", async () => {
    // An owner that left no heartbeat (nothing says it is dead): its leases are free once they expire.
    for (const address of fx.relayerKeys.map((k) => relayerAddress(k).toLowerCase())) {
      await fx.database.db.execute(sql`
        INSERT INTO relayer_accounts (address, chain_id, lease_owner, lease_expires_at) VALUES (${address}, 31337, 'vanished', now() - interval '1 second')
        ON CONFLICT (address) DO UPDATE SET lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at`);
    }
    // Date an hour behind (NTP correcting a fast clock, a restored VM). Before, expiry was the stored time against
    // this Date: the leases looked held for the hour, and this worker relayed with none.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      const w = await startInProcessWorker(fx);
      workers.push(w);
      await waitFor("all four relayers leased", async () => ((await leasedBy(w.workerId)) === 4 ? true : undefined), 8_000);
      expect(await leasedBy(w.workerId)).toBe(4);
    } finally {
      vi.useRealTimers();
    }
  });
});
