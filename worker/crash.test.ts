import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayerAccounts } from "@/db/schema";
import { requestIdHash } from "@/lib/chain/ids";
import {
  SPONSOR_AMOUNT,
  anvilRpc,
  chainNonces,
  createRequest,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  spawnWorker,
  stopSpawned,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * Issue 4 "Crash": a real worker process killed with SIGKILL right after it broadcast a sponsorship (the test hook
 * WORKER_TEST_CRASH_AFTER_BROADCASTS, so the kill lands between the broadcast and its bookkeeping, not "some time
 * later"), then started again: the request completes once, the chain shows one sponsorship, no nonce is left open.
 */

let fx: PipelineFixture;
const spawned: SpawnedWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {});

afterAll(async () => {
  for (const w of spawned) await stopSpawned(w);
});

async function crashThenRestart(id: string): Promise<void> {
  const crashing = spawnWorker(fx, { WORKER_TEST_CRASH_AFTER_BROADCASTS: "1" });
  spawned.push(crashing);
  const exit = await crashing.exited;
  expect(exit.signal, crashing.output()).toBe("SIGKILL");
  expect(crashing.output()).toContain("test hook: SIGKILL right after broadcast");

  // Killed before it could record the broadcast: the attempt is stored (hash, raw bytes) and still queued.
  const [stored] = await readRelays(fx, id);
  expect(stored!.status).toBe("queued");
  expect(stored!.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);

  const restarted = spawnWorker(fx);
  spawned.push(restarted);
  await waitFor("the request to complete after the restart", async () => (await readRequest(fx, id)).status === "completed", 30_000);
  expect(restarted.output()).toContain("relayer lease acquired");
  await stopSpawned(restarted);
}

describe("a worker killed right after broadcast", () => {
  it("resumes after a restart: completed once, one on-chain sponsorship, no nonce gap left behind (transaction already mined)", async () => {
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    const { id, wallet } = await createRequest(fx);
    const before = await fx.clients.getBalance({ address: wallet });

    await crashThenRestart(id);

    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toEqual([
      { requestId: id, requestIdHash: requestIdHash(id), wallet, transactionHash: relays[0]!.transactionHash },
    ]);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(before + SPONSOR_AMOUNT);
    const [account] = await fx.database.db.select().from(relayerAccounts).where(eq(relayerAccounts.address, relayer));
    expect(await chainNonces(fx, relayer)).toEqual({ latest: account!.nextNonce, pending: account!.nextNonce });
  });

  it("resumes after a restart while the transaction still waits in the pool: it is recognised, not sent twice", async () => {
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    await anvilRpc(fx, "evm_setAutomine", [false]);
    const { id, wallet } = await createRequest(fx);
    const crashing = spawnWorker(fx, { WORKER_TEST_CRASH_AFTER_BROADCASTS: "1" });
    spawned.push(crashing);
    expect((await crashing.exited).signal).toBe("SIGKILL");
    const [stored] = await readRelays(fx, id);
    expect(stored!.status).toBe("queued");

    const restarted = spawnWorker(fx);
    spawned.push(restarted);
    await waitFor("the restarted worker to record the broadcast", async () => (await readRelays(fx, id))[0]?.status === "submitted", 30_000);
    await anvilRpc(fx, "evm_mine");
    await anvilRpc(fx, "evm_setAutomine", [true]);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    await stopSpawned(restarted);

    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.status, r.transactionHash])).toEqual([[1, "confirmed", stored!.transactionHash]]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
    const [account] = await fx.database.db.select().from(relayerAccounts).where(eq(relayerAccounts.address, relayer));
    expect(await chainNonces(fx, relayer)).toEqual({ latest: account!.nextNonce, pending: account!.nextNonce });
  });
});
