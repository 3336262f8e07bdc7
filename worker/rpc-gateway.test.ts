import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startRpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import {
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
 * decisions.md "Pipeline": errors before anything was broadcast consume no attempt. Here the worker reaches the
 * real anvil through an HTTP gateway (as with a hosted RPC provider) that, for a while, answers
 * `eth_sendRawTransaction` with an error that is no verdict on the transaction: an HTTP error without a JSON-RPC
 * answer (an expired API key: 401), or one JSON-RPC error for the whole batch (a provider's batch limit).
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
type Refusal = "http_401" | "batch_error" | false;
let gateway: { url: string; refused: () => number; refuse: (how: Refusal) => void; close: () => Promise<void> };

async function startGateway(target: string) {
  let refusing: Refusal = false;
  let refused = 0;
  const proxy = await startRpcProxy(target, (body) => {
    if (!refusing || !body.includes("eth_sendRawTransaction")) return undefined;
    refused++;
    return refusing === "http_401"
      ? { status: 401, contentType: "text/plain", body: "Unauthorized" }
      : { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "batch too large" } }) };
  });
  return {
    url: proxy.url,
    refused: () => refused,
    refuse: (how: Refusal) => void (refusing = how),
    close: proxy.close,
  };
}

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  gateway = await startGateway(fx.anvil.rpcUrl);
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  gateway.refuse(false);
});

afterAll(async () => {
  await gateway?.close();
});

describe("an RPC gateway refusing broadcasts without judging the transaction", () => {
  it.each([
    ["an HTTP 401 without a JSON-RPC answer", "http_401"],
    ["one JSON-RPC error (-32600) for the whole batch", "batch_error"],
  ] as const)(
    "burns no attempt on %s: the stored transaction waits queued and is sent once the gateway lets it through",
    async (_, how) => {
      const refusedBefore = gateway.refused();
      gateway.refuse(how);
      worker = await startInProcessWorker(fx, { RPC_URL: gateway.url });
      const { id, wallet } = await createRequest(fx);
      const before = await fx.clients.getBalance({ address: wallet });

      // The first broadcast and at least one re-broadcast (3 s later) were refused.
      await waitFor("two refused broadcasts", async () => gateway.refused() - refusedBefore >= 2, 30_000);
      const waiting = await readRelays(fx, id);
      expect(waiting.map((r) => [r.relayAttempt, r.status, r.failureReason])).toEqual([[1, "queued", null]]);
      expect((await readRequest(fx, id)).status).toBe("relayed");

      gateway.refuse(false);
      await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
      const relays = await readRelays(fx, id);
      expect(relays.map((r) => [r.relayAttempt, r.status, r.transactionHash])).toEqual([[1, "confirmed", waiting[0]!.transactionHash]]);
      expect(await fx.clients.getBalance({ address: wallet })).toBe(before + 10n ** 16n);
      expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
    },
    90_000,
  );
});
