import { afterEach, describe, expect, it } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { checkHealth } from "@/lib/health";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { chainRpc, startTestChain } from "@/test/chain";
import { keptLog } from "@/test/kept-log";
import { startDownRpcProxy, type DownRpcProxy } from "@/test/rpc-proxy";
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
 * decisions.md "Several RPC endpoints": RPC_URL lists endpoints of one chain. Start-up refuses endpoints that answer
 * different chain ids (worker/rpc-endpoints.test.ts), but an endpoint down at start-up was never asked which chain it
 * serves: when it came up serving another (a mainnet URL beside the testnet's), its reads were used, and its higher
 * head left the right endpoint "behind", so every read went to it. Here the second endpoint refuses connections at
 * start-up (test/rpc-proxy.ts `startDownRpcProxy`), then forwards to an anvil of chain 8453 a hundred blocks ahead.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let foreign: Anvil | undefined;
let down: DownRpcProxy | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await down?.close();
  down = undefined;
  await foreign?.stop();
  foreign = undefined;
});

const heartbeat = () => readHeartbeat(fx, worker!.workerId);

describe("an RPC endpoint down at start-up that comes up serving another chain", () => {
  it("is asked its chain id before any read, then left aside for good with one error line naming both ids, shown in the heartbeat and /health; the worker goes on", async () => {
    foreign = await startTestChain({ chainId: 8453 });
    await chainRpc(foreign.rpcUrl, "anvil_mine", ["0x64"]);
    down = await startDownRpcProxy(foreign.rpcUrl);
    const { log, lines } = keptLog();
    const env = { RPC_URL: `${fx.anvil.rpcUrl},${down.url}` };
    worker = await startInProcessWorker(fx, env, {}, log);
    // Start-up read the chain id from the first endpoint; the second was not reached (it cools off for 10 s).
    expect(worker.ctx.chain.endpoints.map((e) => e.reachable)).toEqual([true, false]);

    down.up();
    // A request in flight keeps the maintenance checks (the surveys) at every heartbeat; once the cool-off has ended,
    // one reaches the endpoint that came up.
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const second = () => worker!.ctx.chain.endpoints[1]!;
    await waitFor(
      "a survey to reach the endpoint that came up",
      async () => second().reachable && (second().otherChain || second().head !== undefined),
      60_000,
    );

    // The worker goes on with the right endpoint: the next request completes with its one attempt. The endpoint of the
    // other chain was sent the first request's broadcast while its chain id was unknown (every endpoint is; its answer
    // did not count), then asked its chain id and head once, together, and nothing since: no read, no broadcast.
    // Before: never asked its chain id, sent every broadcast and surveyed at every check.
    const next = await createRequest(fx);
    await waitFor("the next request to complete", async () => (await readRequest(fx, next.id)).status === "completed", 30_000);
    expect((await readRelays(fx, next.id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    // (At most one broadcast: on a loaded machine the survey may come first, and then it is sent none.)
    const { eth_sendRawTransaction: broadcasts = 0, ...asked } = down.byMethod();
    expect(broadcasts).toBeLessThanOrEqual(1);
    expect(asked).toEqual({ eth_chainId: 1, eth_blockNumber: 1 });

    // Before, its head (100 blocks higher) left the right endpoint behind 3 s later, and every read went to the other
    // chain; now it is known for what it is, and its head was never counted.
    expect(worker.ctx.chain.endpoints.map((e) => [e.behind, e.otherChain, e.chainId])).toEqual([
      [false, false, 31337],
      [false, true, 8453],
    ]);
    const errors = lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      msg: expect.stringMatching(/^RPC endpoint serves another chain/),
      fields: { endpoint: 2, chainId: 8453, expectedChainId: 31337 },
    });

    const beat = await waitFor("a heartbeat naming the endpoint of another chain", async () => {
      const d = await heartbeat();
      return d?.chain.endpoints[1]?.otherChain ? d : undefined;
    });
    expect(beat.chain.endpoints.map((e) => [e.chainId, e.otherChain, e.behind, e.blockNumber])).toEqual([
      [31337, false, false, expect.any(String)],
      [8453, true, false, null],
    ]);

    // /health names it by its position, with the chain it serves; the chain's head is the right endpoint's.
    const head = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    const report = await checkHealth({ db: fx.database.db, config: fx.config(env) });
    healthResponse.parse(report.body);
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.chain).toMatchObject({ status: "degraded", code: "endpoints_other_chain", chainId: 31337, blockNumber: head.toString() });
    expect(report.body.checks.chain.endpoints!.map((e) => [e.index, e.status, e.chainId])).toEqual([
      [1, "ok", undefined],
      [2, "other_chain", 8453],
    ]);
  }, 150_000);
});
