import { and, eq } from "drizzle-orm";
import { keccak256, parseTransaction, type Hex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { relayerNonceFills } from "@/db/schema";
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
  startPipelineFixture,
  waitFor,
  type PipelineFixture,
} from "./test-support";

/**
 * A replacement the node refuses for good ("replacement transaction underpriced": a node with a higher price bump
 * than ours) fails, and the attempt it was to replace was closed with it, while the node still holds that attempt
 * at the relayer's lowest unmined nonce. Unwatched, it would hold back every later nonce of the relayer. The worker
 * cancels it with a fill that outbids everything stored at that nonce, and the request completes by a later
 * attempt. On a real anvil with mining paused, behind a JSON-RPC proxy that refuses the replacement.
 */

let fx: PipelineFixture;
let proxy: RpcProxy;
let worker: RunningWorker | undefined;
/** The attempt whose same-nonce replacements the proxy refuses. */
let target: { nonce: number; hash: string } | undefined;
const refused: string[] = [];

type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown[] };

function isRefusedReplacement(call: Call): boolean {
  if (!target || call.method !== "eth_sendRawTransaction") return false;
  const raw = call.params?.[0] as Hex;
  const tx = parseTransaction(raw);
  return tx.to?.toLowerCase() === fx.deployment.treasuryAddress.toLowerCase() && tx.nonce === target.nonce && keccak256(raw) !== target.hash;
}

beforeAll(async () => {
  fx = await startPipelineFixture({ blockTime: 0, relayers: 1 });
  proxy = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
    const parsed = JSON.parse(body) as Call | Call[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    if (!calls.some(isRefusedReplacement)) return undefined;
    // Refuse the replacement; let the rest of the batch through to the node.
    const answers = await Promise.all(
      calls.map(async (call) => {
        if (isRefusedReplacement(call)) {
          refused.push(keccak256(call.params![0] as Hex));
          return { jsonrpc: "2.0", id: call.id, error: { code: -32000, message: "replacement transaction underpriced" } };
        }
        return (await (await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call) })).json()) as unknown;
      }),
    );
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
  });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

afterAll(async () => {
  await proxy?.close();
  await fx?.stop();
});

describe("a replacement the node refuses for good", () => {
  it("leaves no transaction of ours unwatched: the one the node still holds is cancelled by a fill, and the request completes once", async () => {
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    await anvilRpc(fx, "evm_setAutomine", [false]);
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, RELAY_TIMEOUT_MS: "1500" });
    const { id, wallet } = await createRequest(fx);
    const first = await waitFor("the first attempt to be submitted", async () => {
      const [r] = await readRelays(fx, id);
      return r?.status === "submitted" ? r : undefined;
    });
    target = { nonce: first.nonce!, hash: first.transactionHash! };

    // Not mined within RELAY_TIMEOUT_MS: replaced at the same nonce, and the node refuses the replacement.
    const second = await waitFor("the replacement to be refused", async () => {
      const r = (await readRelays(fx, id)).find((x) => x.relayAttempt === 2);
      return r?.status === "failed" ? r : undefined;
    });
    expect(second.nonce).toBe(first.nonce);
    expect(second.failureReason).toMatch(/rejected by the node before broadcast: .*replacement transaction underpriced/);
    expect(refused).toContain(second.transactionHash);
    // The node still holds the first attempt at the relayer's lowest unmined nonce.
    expect(await anvilRpc(fx, "eth_getTransactionByHash", [first.transactionHash])).not.toBeNull();

    // Nothing open covers that nonce: after RELAY_TIMEOUT_MS a fill outbidding both is sent at it.
    const fill = await waitFor("a fill at the first attempt's nonce", async () => {
      const [f] = await fx.database.db
        .select()
        .from(relayerNonceFills)
        .where(and(eq(relayerNonceFills.relayerAddress, relayer), eq(relayerNonceFills.nonce, first.nonce!)));
      return f?.status === "submitted" ? f : undefined;
    }, 15_000);
    expect(fill.reason).toMatch(/nothing open covered/);
    expect(fill.maxFeePerGas! * 10n).toBeGreaterThanOrEqual(second.maxFeePerGas! * 11n);

    // Mining resumes: the fill takes the nonce, a later attempt pays the wallet, once.
    await anvilRpc(fx, "evm_mine");
    await anvilRpc(fx, "evm_setAutomine", [true]);
    await waitFor("the request to complete", async () => ((await readRequest(fx, id)).status === "completed" ? true : undefined), 30_000);
    const [settledFill] = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.id, fill.id));
    expect(settledFill!.status).toBe("confirmed");
    const relays = await readRelays(fx, id);
    expect(relays.filter((r) => r.status === "confirmed")).toHaveLength(1);
    expect(relays.find((r) => r.status === "confirmed")!.nonce).toBeGreaterThan(first.nonce!);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(SPONSOR_AMOUNT);
    const nonces = await chainNonces(fx, relayer);
    expect(nonces.pending).toBe(nonces.latest);
  });
});
