import { keccak256, parseTransaction, type Hex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  anvilRpc,
  chainNonces,
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
 * A replacement the node refuses for good ("replacement transaction underpriced": a node that asks for a bigger
 * price bump than ours) fails alone: the attempt it was to replace stays open while the node holds it, so it is
 * still watched (replaced again, outbidding both, one try per RELAY_TIMEOUT_MS) and, if it is mined after all, it
 * completes its request, even when the refused replacement was the request's last attempt. On a real anvil with
 * mining paused, behind a JSON-RPC proxy that refuses the first replacement.
 */

let fx: PipelineFixture;
let proxy: RpcProxy;
let worker: RunningWorker | undefined;
/** The attempt whose same-nonce replacements the proxy refuses: the first one only, or all (fills too). */
let target: { nonce: number; hash: string; all: boolean } | undefined;
const refused: string[] = [];

type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown[] };

/** A transaction the node accepted, then dropped: sent again, it is refused ("transaction underpriced"). */
let refuseResendOf: string | undefined;

function isRefusedReplacement(call: Call): boolean {
  if (refuseResendOf && call.method === "eth_sendRawTransaction" && keccak256(call.params![0] as Hex) === refuseResendOf) return true;
  if (!target || (!target.all && refused.length > 0) || call.method !== "eth_sendRawTransaction") return false;
  const raw = call.params?.[0] as Hex;
  const tx = parseTransaction(raw);
  const sponsor = tx.to?.toLowerCase() === fx.deployment.treasuryAddress.toLowerCase();
  return (sponsor || target.all) && tx.nonce === target.nonce && keccak256(raw) !== target.hash;
}

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  proxy = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
    const parsed = JSON.parse(body) as Call | Call[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    if (!calls.some(isRefusedReplacement)) return undefined;
    // Refuse the replacement; let the rest of the batch through to the node.
    const answers = await Promise.all(
      calls.map(async (call) => {
        if (isRefusedReplacement(call)) {
          const hash = keccak256(call.params![0] as Hex);
          refused.push(hash);
          const message = hash === refuseResendOf ? "transaction underpriced" : "replacement transaction underpriced";
          return { jsonrpc: "2.0", id: call.id, error: { code: -32000, message } };
        }
        return (await (
          await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call) })
        ).json()) as unknown;
      }),
    );
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
  });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  target = undefined;
  refuseResendOf = undefined;
  refused.length = 0;
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

afterAll(async () => {
  await proxy?.close();
});

/** Mining paused; a worker through the proxy; a request whose first attempt is submitted and targeted. */
async function firstAttemptSubmitted(env: Record<string, string>, refuseAll: boolean) {
  await anvilRpc(fx, "evm_setAutomine", [false]);
  worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, RELAY_TIMEOUT_MS: "1500", ...env });
  const { id, wallet } = await createRequest(fx);
  const first = await waitFor("the first attempt to be submitted", async () => {
    const [r] = await readRelays(fx, id);
    return r?.status === "submitted" ? r : undefined;
  });
  target = { nonce: first.nonce!, hash: first.transactionHash!, all: refuseAll };
  // Not mined within RELAY_TIMEOUT_MS: replaced at the same nonce, and the node refuses the replacement.
  const second = await waitFor("the replacement to be refused", async () => {
    const r = (await readRelays(fx, id)).find((x) => x.relayAttempt === 2);
    return r?.status === "failed" ? r : undefined;
  });
  expect(second.nonce).toBe(first.nonce);
  expect(second.failureReason).toMatch(/rejected by the node before broadcast: .*replacement transaction underpriced/);
  expect(refused[0]).toBe(second.transactionHash);
  // The replaced attempt is still open: the node holds it, and it could still be mined.
  expect((await readRelays(fx, id)).find((x) => x.relayAttempt === 1)!.status).toBe("submitted");
  expect(await anvilRpc(fx, "eth_getTransactionByHash", [first.transactionHash])).not.toBeNull();
  return { id, wallet, first, second };
}

async function resumeMiningAndComplete(id: string) {
  await anvilRpc(fx, "evm_mine");
  await anvilRpc(fx, "evm_setAutomine", [true]);
  await waitFor("the request to complete", async () => ((await readRequest(fx, id)).status === "completed" ? true : undefined), 30_000);
}

describe("a replacement the node refuses for good", () => {
  it("leaves the attempt it was to replace open and watched: replaced again, outbidding both, and the request completes once", async () => {
    const { id, wallet, first, second } = await firstAttemptSubmitted({}, false);

    // RELAY_TIMEOUT_MS after the refused one (not at once: one try per timeout), the next attempt at the same nonce
    // outbids both; the first stays open until the nonce is settled.
    const third = await waitFor(
      "attempt 3 to be submitted",
      async () => {
        const r = (await readRelays(fx, id)).find((x) => x.relayAttempt === 3);
        return r?.status === "submitted" ? r : undefined;
      },
      15_000,
    );
    expect(third.nonce).toBe(first.nonce);
    expect(third.createdAt.getTime() - second.createdAt.getTime()).toBeGreaterThanOrEqual(1500);
    expect(third.maxFeePerGas! * 10n).toBeGreaterThanOrEqual(second.maxFeePerGas! * 11n);
    expect((await readRelays(fx, id)).find((x) => x.relayAttempt === 1)!.status).toBe("submitted");

    await resumeMiningAndComplete(id);
    const relays = await readRelays(fx, id);
    // One attempt paid (the newest the node held when mining resumed); every other one failed, all at that nonce.
    expect(relays.filter((r) => r.status === "confirmed")).toHaveLength(1);
    expect(relays.filter((r) => r.status !== "confirmed" && r.status !== "failed")).toEqual([]);
    expect(new Set(relays.map((r) => r.nonce))).toEqual(new Set([first.nonce]));
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
    const nonces = await chainNonces(fx, relayerAddress(fx.relayerKeys[0]!));
    expect(nonces.pending).toBe(nonces.latest);
  });

  it("when the refused replacement was the last attempt and the replaced one is mined after all, the request completes (not failed)", async () => {
    // Every later transaction at that nonce is refused (a cancelling fill too): the node keeps attempt 1.
    const { id, wallet } = await firstAttemptSubmitted({ MAX_RELAY_ATTEMPTS: "2" }, true);

    // Mining resumes and attempt 1 pays the wallet.
    await resumeMiningAndComplete(id);
    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.status])).toEqual([
      [1, "confirmed"],
      [2, "failed"],
    ]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
  });
});

describe("an attempt the node accepted, dropped, and refuses when it is sent again", () => {
  it("stays open (it may still be mined elsewhere): the refusal fails only an attempt no node ever accepted", async () => {
    await anvilRpc(fx, "evm_setAutomine", [false]);
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, RELAY_TIMEOUT_MS: "60000" });
    const { id, wallet } = await createRequest(fx);
    const first = await waitFor("the first attempt to be submitted", async () => {
      const [r] = await readRelays(fx, id);
      return r?.status === "submitted" ? r : undefined;
    });
    // The node drops it from its pool (a full pool evicts the cheapest); sent again, it refuses it.
    refuseResendOf = first.transactionHash!;
    await anvilRpc(fx, "anvil_dropTransaction", [first.transactionHash]);
    // Refused twice: after the first refusal it was still open and watched (before, that refusal failed it as
    // "rejected by the node before broadcast", it was never sent again, and the relay stage signed another).
    await waitFor("the attempt to be sent again and refused twice", async () =>
      refused.filter((h) => h === first.transactionHash).length >= 2 ? true : undefined,
    );
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "submitted"]]);

    refuseResendOf = undefined;
    await waitFor("the attempt to be back in the node's pool", async () =>
      (await anvilRpc(fx, "eth_getTransactionByHash", [first.transactionHash])) ? true : undefined,
    );
    await resumeMiningAndComplete(id);
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
  });
});
