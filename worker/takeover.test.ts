import { eq, sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { relayerAccounts } from "@/db/schema";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  anvilRpc,
  createRequest,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * A worker paused in the middle of a step (GC, SIGSTOP) while its relayer lease passes to another worker, which
 * moves on; when the paused one resumes, it acts on what it read before the pause. Whatever it does then must not
 * contradict the chain. The pause is a gate on one of the paused worker's chain reads (the read itself is real).
 */

let fx: PipelineFixture;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {});

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

describe("a worker resuming after its lease was taken over", () => {
  it("does not fail a request whose next attempt (made by the new owner) is still in flight, so a mined attempt completes it", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const treasury = fx.deployment.treasuryAddress;
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    const settings = { MAX_RELAY_ATTEMPTS: "2" };

    // Attempt 1 will revert: the relayer is de-authorised in the block that mines it (the relay stage does not send
    // with a relayer that is not authorised, so it is removed after the send).
    await anvilRpc(fx, "evm_setAutomine", [false]);
    await anvilRpc(fx, "evm_setIntervalMining", [0]);

    const a = await startInProcessWorker(fx, settings);
    workers.push(a);
    // Worker A will pause right after reading the receipts, before settling the reverted attempt.
    const chainA = a.ctx.chain;
    const explain = chainA.explainSponsorRevert.bind(chainA);
    let entered!: () => void;
    let release!: () => void;
    const pausedInSettle = new Promise<void>((r) => (entered = r));
    const gate = new Promise<void>((r) => (release = r));
    chainA.explainSponsorRevert = async (...args) => {
      entered();
      await gate;
      return explain(...args);
    };

    const { id, wallet } = await createRequest(fx);
    const before = await fx.clients.getBalance({ address: wallet });
    await waitFor("attempt 1 in the pool", async () => (await readRelays(fx, id))[0]?.status === "submitted");
    await owner.writeContract({
      address: treasury,
      abi: treasuryAbi,
      functionName: "removeRelayer",
      args: [relayer],
      maxPriorityFeePerGas: 50_000_000_000n,
      maxFeePerGas: 200_000_000_000n,
    });
    await anvilRpc(fx, "evm_mine");
    await pausedInSettle;

    // While A is paused: the relayer is authorised again, and A's lease passes to worker B.
    await anvilRpc(fx, "evm_setAutomine", [true]);
    const added = await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "addRelayer", args: [relayer] });
    await fx.clients.waitForTransactionReceipt({ hash: added });
    await anvilRpc(fx, "evm_setAutomine", [false]);
    await fx.database.db.update(relayerAccounts).set({ leaseOwner: null, leaseExpiresAt: null }).where(eq(relayerAccounts.address, relayer));
    const b = await startInProcessWorker(fx, settings);
    workers.push(b);

    // B settles attempt 1 (reverted) and sends attempt 2, the last one, which waits in the pool.
    const [first, second] = await waitFor("attempt 2 sent by worker B", async () => {
      const relays = await readRelays(fx, id);
      return relays.length === 2 && relays[1]!.status === "submitted" ? relays : undefined;
    });
    expect(first!.status).toBe("failed");

    // A resumes and finishes settling attempt 1 from what it read before the pause.
    release();
    await waitFor("worker A to finish its stale settle", async () => a.ctx.status.totals.failedAttempts >= 1);
    expect((await readRequest(fx, id)).status).toBe("relayed");

    // Attempt 2 is mined: it pays the wallet, and the request completes.
    await anvilRpc(fx, "evm_mine");
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([
      [1, "failed"],
      [2, "confirmed"],
    ]);
    expect(second!.nonce).toBe(first!.nonce! + 1);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(before + SPONSOR_AMOUNT);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    const failedEvents = await fx.database.db.execute<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM request_events WHERE sponsorship_request_id = ${id} AND to_status = 'failed'`,
    );
    expect(failedEvents[0]!.n).toBe(0);
  });
});
