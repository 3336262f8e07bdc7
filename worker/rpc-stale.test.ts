import { afterEach, describe, expect, it } from "vitest";
import { checkHealth } from "@/lib/health";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { startLaggingRpcProxy, type LaggingRpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import {
  readHeartbeat,
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
 * decisions.md "Operators are told", several RPC endpoints: the first endpoint answers every call, but its head has
 * stopped (test/rpc-proxy.ts `startLaggingRpcProxy`: the chain as it stood at one block, later receipts null, later
 * nonces unused). Asked first for every read, it blinded the worker: a paid wallet's request stayed relayed, a
 * replacement was queued after RELAY_TIMEOUT_MS, and /health said ok. An endpoint more than 3 blocks (LAGGING_BLOCKS)
 * behind the best head of the maintenance check's survey is left aside by reads until it catches up, and /health and
 * the heartbeat name it.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let stale: LaggingRpcProxy | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await stale?.close();
  stale = undefined;
});

const heartbeat = () => readHeartbeat(fx, worker!.workerId);

describe("an RPC endpoint whose head stopped, ahead of a current one", () => {
  it("is left aside by reads: the paid request completes with its one attempt, and /health and the heartbeat name it behind until it catches up", async () => {
    stale = await startLaggingRpcProxy(fx.anvil.rpcUrl);
    const frozenAt = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    stale.freeze(frozenAt);
    // The chain moves on: 5 blocks the stale endpoint does not know (more than LAGGING_BLOCKS).
    await anvilRpc(fx, "anvil_mine", ["0x5"]);
    // A short relay timeout: a worker blinded by the stale endpoint queues a replacement within seconds.
    const env = { RPC_URL: `${stale.url},${fx.anvil.rpcUrl}`, RELAY_TIMEOUT_MS: "3000" };
    worker = await startInProcessWorker(fx, env);

    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(worker.ctx.chain.endpoints.map((e) => [e.reachable, e.behind, e.head])).toEqual([
      [true, true, frozenAt],
      [true, false, expect.any(BigInt)],
    ]);

    const beat = await waitFor("a heartbeat naming the first endpoint behind", async () => {
      const d = await heartbeat();
      return d?.chain.endpoints[0]?.behind ? d : undefined;
    });
    expect(beat.chain.endpoints.map((e) => [e.behind, e.blockNumber])).toEqual([
      [true, frozenAt.toString()],
      [false, expect.any(String)],
    ]);

    const head = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    const report = await checkHealth({ db: fx.database.db, config: fx.config(env) });
    healthResponse.parse(report.body);
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    // The chain's head is the current endpoint's; the stale one is named by its position, with the head it shows.
    expect(report.body.checks.chain).toMatchObject({ status: "degraded", code: "endpoints_behind", blockNumber: head.toString() });
    expect(report.body.checks.chain.endpoints!.map((e) => [e.index, e.status, e.blockNumber])).toEqual([
      [1, "behind", frozenAt.toString()],
      [2, "ok", head.toString()],
    ]);
    expect(report.body.checks.treasury.status).toBe("ok");

    // It catches up: a maintenance check finds it within LAGGING_BLOCKS (one every heartbeat while a request is in
    // flight, every 30 s idle), and reads ask it again.
    stale.freeze(undefined);
    const next = await createRequest(fx);
    await waitFor("the next request to complete", async () => (await readRequest(fx, next.id)).status === "completed", 30_000);
    await waitFor("the worker to find the endpoint caught up", async () => !worker!.ctx.chain.endpoints[0]!.behind, 45_000);
    await waitFor("a heartbeat with the endpoint caught up", async () => (await heartbeat())?.chain.endpoints[0]?.behind === false);
    await waitFor(
      "/health to find every endpoint current",
      async () => (await checkHealth({ db: fx.database.db, config: fx.config(env) })).body.checks.chain.status === "ok",
      10_000,
    );
  }, 150_000);
});
