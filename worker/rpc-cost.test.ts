import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCountingRpcProxy, type CountingRpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import { createRequest, readRequest, startInProcessWorker, waitFor, setUpPipelineFixture, type PipelineFixture } from "@/test/worker-fixture";

/**
 * Issue 12 item 6, RPC cost: hosted providers bill per call. An idle worker (no requests) with four relayers makes
 * at most 30 JSON-RPC calls a minute, counted by a proxy in front of the real anvil. (It used to read every
 * relayer's nonces and the block number every heartbeat: about 270 a minute.)
 */

let fx: PipelineFixture;
let proxy: CountingRpcProxy;
let worker: RunningWorker | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 4 }, (started) => (fx = started));

beforeAll(async () => {
  proxy = await startCountingRpcProxy(fx.anvil.rpcUrl);
});

afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
});

describe("JSON-RPC calls of an idle worker", () => {
  it("are at most 30 per idle minute (four relayers, production heartbeat), and a new request is still relayed at once", async () => {
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url }, { heartbeatMs: 2_000 });
    // Warm: one request through the whole pipeline, then idle.
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);

    const before = proxy.calls();
    const methodsBefore = proxy.byMethod();
    const started = Date.now();
    await waitFor("one idle minute", async () => Date.now() - started >= 60_000, 70_000, 1_000);
    const calls = proxy.calls() - before;
    const byMethod = Object.fromEntries(
      Object.entries(proxy.byMethod())
        .map(([m, n]) => [m, n - (methodsBefore[m] ?? 0)])
        .filter(([, n]) => n !== 0),
    );
    // The message shows the measurement when it fails (docs/performance.md quotes it).
    expect(calls, `idle minute: ${calls} JSON-RPC calls ${JSON.stringify(byMethod)}`).toBeLessThanOrEqual(30);

    // Idle does not slow the next request down: it is relayed and completed as before.
    const next = await createRequest(fx);
    await waitFor("the next request to complete", async () => (await readRequest(fx, next.id)).status === "completed", 10_000);
  }, 120_000);
});
