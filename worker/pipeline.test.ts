import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { readIsSponsored } from "@/lib/chain/registry";
import { uuidToBytes16 } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { setAppContextForTests } from "@/lib/http/app-context";
import { blockWallet } from "@/lib/sponsorship/blocks";
import { GET as getByHash } from "@/app/(api)/sponsorship/tx/[hash]/route";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  createRequest,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  startInProcessWorker,
  startPipelineFixture,
  waitFor,
  type PipelineFixture,
} from "./test-support";

/**
 * The pipeline end to end (issue 4 "What must be shown"): real PostgreSQL, real anvil (a transaction mined at
 * once), the contracts deployed, requests created through the API's domain function, a worker in this process.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
const deployer = relayerAddress(LOCAL_DEPLOYER_KEY);

beforeAll(async () => {
  // The deployer is authorised too, so a test can sponsor a wallet on-chain behind the service's back.
  fx = await startPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [deployer] });
  setAppContextForTests({ db: fx.database.db, config: fx.config() });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});

afterAll(async () => {
  setAppContextForTests({});
  await fx?.stop();
});

async function waitStatus(id: string, status: string, timeoutMs = 20_000) {
  return waitFor(`request ${id} to be ${status}`, async () => {
    const row = await readRequest(fx, id);
    return row.status === status ? row : undefined;
  }, timeoutMs);
}

describe("a request goes through the pipeline", () => {
  it("reaches completed: the wallet receives the amount, isSponsored is true, the hash is recorded and findable", async () => {
    const { id, wallet } = await createRequest(fx);
    const before = await fx.clients.getBalance({ address: wallet });
    worker = await startInProcessWorker(fx);

    const done = await waitStatus(id, "completed");
    expect(done.eligibilityReason).toBe("eligible");
    expect(done.approvedAt).not.toBeNull();
    expect(done.completedAt).not.toBeNull();
    expect(done.statusActor).toBe(`worker:${worker.workerId}`);

    const after = await fx.clients.getBalance({ address: wallet });
    expect(after - before).toBe(SPONSOR_AMOUNT);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(true);

    const relays = await readRelays(fx, id);
    expect(relays).toHaveLength(1);
    const relay = relays[0]!;
    expect(relay.status).toBe("confirmed");
    expect(relay.relayAttempt).toBe(1);
    expect(relay.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(relay.rawTransaction).toMatch(/^0x/);
    expect(relay.nonce).toBe(0);
    expect(relay.submittedAt).not.toBeNull();
    expect(relay.confirmedAt).not.toBeNull();
    expect(relay.blockNumber).toBeGreaterThan(0);

    const receipt = await fx.clients.getTransactionReceipt({ hash: relay.transactionHash as `0x${string}` });
    expect(receipt.status).toBe("success");

    const hash = relay.transactionHash!.toUpperCase().replace("0X", "0x");
    const res = await getByHash(new Request(`http://localhost/sponsorship/tx/${hash}`), { params: Promise.resolve({ hash }) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string; status: string; relayTransactions: { transactionHash: string }[] };
    expect(body.id).toBe(id);
    expect(body.status).toBe("completed");
    expect(body.relayTransactions.map((r) => r.transactionHash)).toEqual([relay.transactionHash]);

    const events = (await readSponsoredEvents(fx)).filter((e) => e.requestId === id);
    expect(events).toEqual([{ requestId: id, wallet, transactionHash: relay.transactionHash }]);
  });

  it("rejects a wallet blocked between creation and review (wallet_blocked), with no relay", async () => {
    const { id, wallet } = await createRequest(fx);
    await blockWallet(fx.database.db, { walletAddress: wallet, reason: "abuse", actor: "admin:test" });
    worker = await startInProcessWorker(fx);

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("wallet_blocked");
    expect(row.rejectedAt).not.toBeNull();
    expect(await readRelays(fx, id)).toEqual([]);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(false);
  });

  it("rejects a wallet sponsored on-chain after the request was created (already_sponsored), with no relay", async () => {
    const { id, wallet } = await createRequest(fx);
    // Someone else pays the wallet through the treasury before the worker reviews the request.
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const hash = await owner.writeContract({
      address: fx.deployment.treasuryAddress,
      abi: treasuryAbi,
      functionName: "sponsor",
      args: [wallet, uuidToBytes16("00000000-0000-4000-8000-000000000001")],
    });
    await fx.clients.waitForTransactionReceipt({ hash });
    worker = await startInProcessWorker(fx);

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("already_sponsored");
    expect(await readRelays(fx, id)).toEqual([]);
  });
});
