import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { readIsSponsored } from "@/lib/chain/registry";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  anvilRpc,
  createRequest,
  readRelays,
  readRequest,
  readSponsoredEvents,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * CONFIRMATIONS (docs/worker.md "Confirmation depth"): a request is completed only once its transaction is that
 * many blocks deep, and a reorg that drops the transaction's block before then leaves it relayed: the worker sends
 * the same signed bytes again and completes it once they are mined deep enough. On a real anvil whose mining the
 * tests drive (automine off, `evm_mine`, `anvil_reorg` replacing the newest block by an empty one).
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

/** Starts a worker with CONFIRMATIONS, mining paused; creates a request and mines its relay in one block. */
async function relayedAndMinedOnce(confirmations: number, env: Record<string, string> = {}) {
  await anvilRpc(fx, "evm_setAutomine", [false]);
  worker = await startInProcessWorker(fx, { CONFIRMATIONS: String(confirmations), ...env });
  const { id, wallet } = await createRequest(fx);
  const relay = await waitFor("the relay transaction to be submitted", async () => {
    const [r] = await readRelays(fx, id);
    return r?.status === "submitted" ? r : undefined;
  });
  await anvilRpc(fx, "evm_mine");
  const receipt = await fx.clients.getTransactionReceipt({ hash: relay.transactionHash as `0x${string}` });
  expect(receipt.status).toBe("success");
  return { id, wallet, hash: relay.transactionHash as `0x${string}`, minedIn: receipt.blockNumber, submittedAt: relay.submittedAt! };
}

/** Waits until the worker has finished a confirm pass with `block` (or a later one) as the head. */
async function checkedThrough(block: bigint): Promise<void> {
  await waitFor(`the worker to check through block ${block}`, async () => {
    const checked = worker!.ctx.status.checkedBlock;
    return checked !== undefined && checked >= block ? true : undefined;
  });
}

describe("confirmation depth (CONFIRMATIONS)", () => {
  it("completes a request only once its transaction is CONFIRMATIONS blocks deep", async () => {
    const { id, wallet, hash, minedIn } = await relayedAndMinedOnce(3);

    // Mined, one block deep, then two: the worker has looked at each head and the request still waits.
    await checkedThrough(minedIn);
    expect((await readRequest(fx, id)).status).toBe("relayed");
    await anvilRpc(fx, "evm_mine");
    await checkedThrough(minedIn + 1n);
    expect((await readRequest(fx, id)).status).toBe("relayed");

    // Three deep: completed, with the block it was mined in.
    await anvilRpc(fx, "evm_mine");
    await waitFor("the request to be completed", async () => ((await readRequest(fx, id)).status === "completed" ? true : undefined));
    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.status, r.transactionHash, r.blockNumber])).toEqual([["confirmed", hash, Number(minedIn)]]);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
  });

  it("a reorg that drops the block before it is deep enough: the same transaction is sent again, mined, and the request completed once", async () => {
    const timeoutMs = 2_000;
    const { id, wallet, hash, minedIn, submittedAt } = await relayedAndMinedOnce(2, { RELAY_TIMEOUT_MS: String(timeoutMs) });
    await checkedThrough(minedIn);
    expect((await readRequest(fx, id)).status).toBe("relayed");

    // Mined but not deep enough for longer than RELAY_TIMEOUT_MS (a condition of the test): a transaction that is
    // mined is not stuck, so it is not replaced.
    await waitFor(
      "a confirm pass after RELAY_TIMEOUT_MS",
      async () => ((worker!.ctx.status.checkedAt ?? 0) > submittedAt.getTime() + timeoutMs + 500 ? true : undefined),
      15_000,
    );
    expect((await readRelays(fx, id)).map((r) => r.status)).toEqual(["submitted"]);

    // The block that held it is replaced by an empty one: the payment is undone and the node no longer holds it.
    await anvilRpc(fx, "anvil_reorg", [1, []]);
    expect(await anvilRpc(fx, "eth_getTransactionReceipt", [hash])).toBeNull();
    expect(await anvilRpc(fx, "eth_getTransactionByHash", [hash])).toBeNull();
    expect(await fx.clients.getBalance({ address: wallet })).toBe(0n);

    // The worker broadcasts the stored bytes again (same hash: no attempt burned); its time mined does not count
    // as time unmined, so it is not replaced at once either.
    await waitFor(
      "the transaction to be back in the node's pool",
      async () => ((await anvilRpc(fx, "eth_getTransactionByHash", [hash])) !== null ? true : undefined),
      15_000,
    );
    expect((await readRequest(fx, id)).status).toBe("relayed");
    await anvilRpc(fx, "evm_mine");
    await anvilRpc(fx, "evm_mine");
    await waitFor("the request to be completed", async () => ((await readRequest(fx, id)).status === "completed" ? true : undefined));

    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.status, r.transactionHash])).toEqual([[1, "confirmed", hash]]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(true);
  });
});
