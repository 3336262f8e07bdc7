import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { createRequests, readSponsoredEvents, setUpPipelineFixture, startInProcessWorker, waitTerminal, type PipelineFixture } from "@/test/worker-fixture";
import type { RunningWorker } from "./worker";

/**
 * A provider's batch limit (RPC_BATCH_SIZE). Hosted JSON-RPC providers cap the calls of one batched HTTP request,
 * some at a few, and refuse a larger batch as a whole with one JSON-RPC error. The worker sent up to 200 calls in one
 * batch (a review's dry runs, a relay pass's broadcasts, the confirm stage's receipts): behind such a provider every
 * review and every full broadcast was refused at every pass, and the requests stayed pending for ever (the refusal
 * is no verdict on them: docs/worker.md, "Errors before broadcast consume no attempt"). Here the worker reaches the
 * real anvil through a gateway that refuses any batch above its limit, with RPC_BATCH_SIZE set to it.
 */

type RpcCall = { method: string };

let fx: PipelineFixture;
let gateway: RpcProxy;
let worker: RunningWorker | undefined;
/** The calls of each JSON array the gateway was sent (a call sent alone is not a batch, and not listed). */
const batches: RpcCall[][] = [];
let singles = 0;
let refused = 0;
/** The largest batch the gateway takes; 0: it refuses any JSON array (a provider without batches). */
let limit = 4;

setUpPipelineFixture({ blockTime: 1, relayers: 2 }, (started) => (fx = started));

beforeAll(async () => {
  gateway = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
    const parsed = JSON.parse(body) as RpcCall | RpcCall[];
    if (!Array.isArray(parsed)) {
      singles++;
      return undefined;
    }
    batches.push(parsed);
    if (parsed.length <= limit) return undefined;
    refused++;
    // As providers answer: HTTP 200, one error object for the whole batch.
    return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: `batch too large: at most ${limit} calls` } }) };
  });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});

afterAll(async () => {
  await gateway?.close();
});

describe("a provider that refuses batches above a limit", () => {
  it("is sent none with RPC_BATCH_SIZE at its limit: every request is reviewed, relayed and completed, paid once", async () => {
    limit = 4;
    batches.length = 0;
    refused = 0;
    // Created before the worker starts: its first review takes all twelve, and its relay pass relays them together.
    const created = await createRequests(fx, 12);
    worker = await startInProcessWorker(fx, { RPC_URL: gateway.url, RPC_BATCH_SIZE: "4" });
    expect(
      await waitTerminal(
        fx,
        created.map((r) => r.id),
        60_000,
      ),
    ).toEqual({ completed: 12 });

    expect(refused).toBe(0);
    // Still batched, up to the limit: what did not fit went in further requests.
    expect(Math.max(...batches.map((b) => b.length))).toBe(4);
    const dryRunBatches = batches.filter((b) => b.filter((c) => c.method === "eth_call").length >= 4);
    expect(dryRunBatches.length).toBeGreaterThan(0);
    const events = await readSponsoredEvents(fx);
    const ids = new Set(created.map((r) => r.id));
    expect(events.filter((e) => e.requestId !== null && ids.has(e.requestId)).length).toBe(12);
  });

  it("with RPC_BATCH_SIZE=1, is sent every call on its own: no JSON array at all", async () => {
    limit = 0;
    batches.length = 0;
    refused = 0;
    const singlesBefore = singles;
    const created = await createRequests(fx, 5);
    worker = await startInProcessWorker(fx, { RPC_URL: gateway.url, RPC_BATCH_SIZE: "1" });
    expect(
      await waitTerminal(
        fx,
        created.map((r) => r.id),
        60_000,
      ),
    ).toEqual({ completed: 5 });
    expect(batches.length).toBe(0);
    expect(singles - singlesBefore).toBeGreaterThan(5);
    const events = await readSponsoredEvents(fx);
    const ids = new Set(created.map((r) => r.id));
    expect(events.filter((e) => e.requestId !== null && ids.has(e.requestId)).length).toBe(5);
  });
});
