import type { Hex } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { checkHealth } from "@/lib/health";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { startCountingRpcProxy, startLaggingRpcProxy, startRpcProxy, type CountingRpcProxy } from "@/test/rpc-proxy";
import { WorkerChain } from "./chain";
import type { RunningWorker } from "./worker";
import {
  anvilRpc,
  createRequest,
  readRelays,
  readRequest,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * decisions.md "Operators are told", several RPC endpoints: RPC_URL lists two endpoints of one chain (two JSON-RPC
 * proxies in front of one real anvil, counting what reaches them). Reads fail over to the next endpoint when one
 * does not answer, every raw transaction is broadcast to every endpoint, and /health and the worker's heartbeat
 * show each endpoint's state.
 */

let fx: PipelineFixture;
let first: CountingRpcProxy;
let second: CountingRpcProxy;
let worker: RunningWorker | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  first = await startCountingRpcProxy(fx.anvil.rpcUrl);
  second = await startCountingRpcProxy(fx.anvil.rpcUrl);
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  first.cut(false);
});

afterAll(async () => {
  await first?.close();
  await second?.close();
});

const bothEndpoints = () => ({ RPC_URL: `${first.url},${second.url}` });

describe("RPC_URL with several endpoints", () => {
  it("broadcasts every raw transaction to every endpoint", async () => {
    worker = await startInProcessWorker(fx, bothEndpoints());
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const [relay] = await readRelays(fx, id);
    expect(first.broadcasts.has(relay!.transactionHash!)).toBe(true);
    expect(second.broadcasts.has(relay!.transactionHash!)).toBe(true);
  }, 60_000);

  it("with the first endpoint cut, reads fail over to the second and requests still complete; health and the heartbeat show which is down", async () => {
    first.cut(true);
    worker = await startInProcessWorker(fx, bothEndpoints());
    const secondCallsBefore = second.calls();
    const requests = [await createRequest(fx), await createRequest(fx)];
    for (const { id } of requests) {
      await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
      const relays = await readRelays(fx, id);
      expect(relays.map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
      // Sent to both: the cut one answered 503, the other accepted it.
      expect(first.broadcasts.has(relays[0]!.transactionHash!)).toBe(true);
      expect(second.broadcasts.has(relays[0]!.transactionHash!)).toBe(true);
    }
    expect(second.calls()).toBeGreaterThan(secondCallsBefore);

    // The worker knows which endpoint is down (heartbeat `chain.endpoints`); the chain as a whole is reachable.
    expect(worker.ctx.chain.health.reachable).toBe(true);
    expect(worker.ctx.chain.endpoints.map((e) => [e.url, e.reachable])).toEqual([
      [first.url, false],
      [second.url, true],
    ]);

    const report = await checkHealth({ db: fx.database.db, config: fx.config(bothEndpoints()) });
    healthResponse.parse(report.body);
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.chain).toMatchObject({ status: "degraded", chainId: fx.deployment.chainId });
    expect(report.body.checks.chain.code).toBe("endpoints_down");
    // By position only: /health is public, and an endpoint's address may name internal hosts or hold a key.
    expect(report.body.checks.chain.endpoints!.map((e) => [e.index, e.status])).toEqual([
      [1, "down"],
      [2, "ok"],
    ]);
    expect(JSON.stringify(report.body)).not.toContain(first.url);
    expect(report.body.checks.treasury.status).toBe("ok");
  }, 90_000);
});

type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown[] };

describe("an endpoint answering malformed JSON-RPC", () => {
  it("is failed over like one not reached: its null heads and balances are not read, and requests complete through the other", async () => {
    // A broken gateway: a well-formed JSON-RPC answer whose result is null for the head and the balances.
    const broken = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
      const parsed = JSON.parse(body) as Call | Call[];
      const calls = Array.isArray(parsed) ? parsed : [parsed];
      if (!calls.some((c) => c.method === "eth_blockNumber" || c.method === "eth_getBalance")) return undefined;
      const answers = await Promise.all(
        calls.map(async (call) =>
          call.method === "eth_blockNumber" || call.method === "eth_getBalance"
            ? { jsonrpc: "2.0", id: call.id, result: null }
            : ((await (
                await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call) })
              ).json()) as unknown),
        ),
      );
      return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
    });
    try {
      worker = await startInProcessWorker(fx, { RPC_URL: `${broken.url},${second.url}` });
      const { id } = await createRequest(fx);
      // Before, every relay pass failed on the first endpoint's null head ("Cannot convert null to a BigInt").
      await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
      expect(worker.ctx.chain.endpoints[0]!.lastError).toMatch(/not hex/);
    } finally {
      await worker?.stop();
      worker = undefined;
      await broken.close();
    }
  }, 60_000);
});

/** The current endpoint's refusal of receipts and logs: the whole HTTP request, or each such call in a 200 answer. */
const refusals = {
  "a 503 for any request carrying them": async (body: string) =>
    /"eth_getTransactionReceipt"|"eth_getLogs"/.test(body) ? { status: 503, contentType: "text/plain", body: "Service Unavailable" } : undefined,
  "an error for each of them inside a 200 answer": async (body: string) => {
    if (!/"eth_getTransactionReceipt"|"eth_getLogs"/.test(body)) return undefined;
    const parsed = JSON.parse(body) as Call | Call[];
    const answers = await Promise.all(
      (Array.isArray(parsed) ? parsed : [parsed]).map(async (call) =>
        call.method === "eth_getTransactionReceipt" || call.method === "eth_getLogs"
          ? { jsonrpc: "2.0", id: call.id, error: { code: -32005, message: "request rate exceeded for this method" } }
          : ((await (
              await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call) })
            ).json()) as unknown),
      ),
    );
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
  },
};

describe("an endpoint behind the other", () => {
  it.each(Object.keys(refusals) as (keyof typeof refusals)[])(
    "does not take a nonce one endpoint saw used, and receipts another endpoint does not have yet, for a nonce used elsewhere: the paid request completes (receipts refused by %s)",
    async (refusal) => {
      // The first endpoint is current but cannot serve receipts or logs (a provider's method outage or limit): those
      // reads fail over to the second, which is a block behind until it is let catch up.
      const current = await startRpcProxy(fx.anvil.rpcUrl, refusals[refusal]);
      const behind = await startLaggingRpcProxy(fx.anvil.rpcUrl);
      try {
        behind.freeze(BigInt(await anvilRpc<string>(fx, "eth_blockNumber")));
        // One attempt: a nonce judged "used by a transaction this service did not send" would fail the request.
        worker = await startInProcessWorker(fx, { RPC_URL: `${current.url},${behind.url}`, MAX_RELAY_ATTEMPTS: "1" });
        const { id } = await createRequest(fx);
        const [relay] = await waitFor("the attempt to be mined", async () => {
          const relays = await readRelays(fx, id);
          return relays[0]?.status === "submitted" &&
            (await fx.clients.getTransactionReceipt({ hash: relays[0].transactionHash! as Hex }).catch(() => undefined))
            ? relays
            : undefined;
        });
        // The worker keeps asking the endpoint behind for the receipt for well over SUSPECT_CONFIRM_MS (1 s)...
        const asked = behind.receiptAsks().length;
        await waitFor(
          "receipts asked of the endpoint behind for 3 s, or the attempt closed",
          async () => {
            const asks = behind.receiptAsks().slice(asked);
            if (asks.length >= 2 && asks[asks.length - 1]! - asks[0]! >= 3_000) return true;
            return (await readRelays(fx, id))[0]?.status !== "submitted";
          },
          20_000,
        );
        // ...and the attempt is not closed as dropped meanwhile.
        expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "submitted"]]);
        expect((await readRequest(fx, id)).status).toBe("relayed");

        // The endpoint catches up: the receipt is there, the request completes with its one attempt.
        behind.freeze(undefined);
        await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
        expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status, r.transactionHash])).toEqual([[1, "confirmed", relay!.transactionHash]]);
      } finally {
        await worker?.stop();
        worker = undefined;
        await current.close();
        await behind.close();
      }
    },
    60_000,
  );

  it("refuses to start when RPC_URL lists an endpoint of another chain (its higher head would take every read)", async () => {
    // A mainnet URL beside the testnet's, say: this one answers eth_chainId 8453, anvil 31337.
    const foreign = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
      const call = JSON.parse(body) as { id?: unknown; method?: string };
      if (Array.isArray(call) || call.method !== "eth_chainId") return undefined;
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id: call.id, result: "0x2105" }) };
    });
    try {
      // Before: started on the first endpoint's answer; the foreign one was never asked what chain it serves.
      await expect(WorkerChain.readChainId([fx.anvil.rpcUrl, foreign.url])).rejects.toThrow(
        /^RPC_URL lists endpoints of different chains: endpoint 1 serves chain 31337, endpoint 2 chain 8453/,
      );
      await expect(WorkerChain.readChainId([fx.anvil.rpcUrl, fx.anvil.rpcUrl])).resolves.toBe(31337);
    } finally {
      await foreign.close();
    }
  });
});
