import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toFunctionSelector } from "viem";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { createRequests, setUpPipelineFixture, startInProcessWorker, waitTerminal, type PipelineFixture } from "@/test/worker-fixture";
import type { RunningWorker } from "./worker";

/**
 * Issue 15 (fewer HTTP requests per sponsorship): the review's two chain reads, `areSponsored` of the batch's
 * wallets and the dry run of each payment (`sponsor` as eth_call), are issued together and travel in one JSON-RPC
 * batch, one HTTP request, instead of one after the other. The decisions are those of worker/pipeline.test.ts and
 * worker/open-internet.test.ts (already sponsored, payment refused), which pass unchanged.
 */

type RpcCall = { method: string; params?: [{ to?: string; data?: string }, ...unknown[]] };

let fx: PipelineFixture;
let proxy: RpcProxy;
let worker: RunningWorker | undefined;
const requests: RpcCall[][] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  proxy = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
    const parsed = JSON.parse(body) as RpcCall | RpcCall[];
    requests.push(Array.isArray(parsed) ? parsed : [parsed]);
    return undefined;
  });
});

afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
});

describe("the review's chain reads", () => {
  it("travel in one HTTP request: areSponsored and every dry run of the batch together", async () => {
    const areSponsored = toFunctionSelector("areSponsored(address[])");
    const sponsor = toFunctionSelector("sponsor(address,bytes32)");
    const created = await createRequests(fx, 6);
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url });
    const outcome = await waitTerminal(
      fx,
      created.map((r) => r.id),
      30_000,
    );
    expect(outcome).toEqual({ completed: 6 });

    const ethCalls = (calls: RpcCall[], selector: string) => calls.filter((c) => c.method === "eth_call" && c.params?.[0]?.data?.startsWith(selector));
    const reviews = requests.filter((calls) => ethCalls(calls, areSponsored).length > 0);
    expect(reviews.length).toBeGreaterThan(0);
    // Each dry run of a reviewed wallet went out in the same request as that batch's areSponsored.
    const dryRuns = requests.reduce((n, calls) => n + ethCalls(calls, sponsor).length, 0);
    expect(reviews.reduce((n, calls) => n + ethCalls(calls, sponsor).length, 0)).toBe(dryRuns);
    expect(dryRuns).toBeGreaterThanOrEqual(6);
  });
});
