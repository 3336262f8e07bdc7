import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { checkHealth } from "@/lib/health";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { startCountingRpcProxy, type CountingRpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import { createRequest, readRelays, readRequest, startInProcessWorker, waitFor, setUpPipelineFixture, type PipelineFixture } from "@/test/worker-fixture";

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
