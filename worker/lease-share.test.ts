import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { workerHeartbeats } from "@/db/schema";
import type { RunningWorker } from "./worker";
import { relayerAddress, startInProcessWorker, startPipelineFixture, waitFor, type PipelineFixture } from "./test-support";

/**
 * Relayer leases are shared among the live workers that hold keys for them. A live worker with other keys (or
 * none) must not shrink this worker's share, or some of its relayer accounts would sit unused.
 */

let fx: PipelineFixture;
const workers: RunningWorker[] = [];

beforeAll(async () => {
  fx = await startPipelineFixture({ blockTime: 0, relayers: 4 });
});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await fx.database.db.delete(workerHeartbeats);
  await fx.database.db.execute(sql`UPDATE relayer_accounts SET lease_owner = NULL, lease_expires_at = NULL`);
});

afterAll(async () => {
  await fx?.stop();
});

const beats: NodeJS.Timeout[] = [];
afterEach(() => {
  for (const b of beats.splice(0)) clearInterval(b);
});

/** A live worker on another host: it keeps beating (as a real one does), with the given relayer keys. */
async function otherWorker(id: string, configured: string[]) {
  await fx.database.db.insert(workerHeartbeats).values({
    workerId: id,
    hostname: "another-host",
    pid: 1,
    details: { version: 1, relayers: { configured, leased: [] } },
  });
  beats.push(setInterval(() => void fx.database.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() WHERE worker_id = ${id}`), 300));
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
});
