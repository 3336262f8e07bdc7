import { afterEach, describe, expect, it } from "vitest";
import type { Address } from "viem";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { readRegistryCursor } from "@/db/queries/registry-mirror";
import { startCountingRpcProxy, startLaggingRpcProxy, startRpcProxy, type LaggingRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import {
  anvilRpc,
  randomWallet,
  relayerAddress,
  setUpPipelineFixture,
  sponsorOnChain,
  startInProcessWorker,
  waitFor,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * The registry's mirror (worker/registry-index.ts; decisions.md "No chain call for a request the database refuses",
 * "Several RPC endpoints"): the cursor never passes a block the endpoint that answered the logs did not know. An
 * endpoint behind the surveyed head answers `eth_getLogs` for a range past its own head with the logs it has
 * (anvil, older geth; test/rpc-proxy.ts `startLaggingRpcProxy` does the same), and the mirror used to record the
 * whole range as read: a wallet sponsored in the blocks it did not know was missing from the mirror for good, and
 * creation let its requests through to review. Real PostgreSQL, real anvil.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let proxies: RpcProxy[] = [];

// The treasury's owner sponsors wallets directly (behind the service's back): it is authorised as a relayer too.
setUpPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [relayerAddress(LOCAL_DEPLOYER_KEY)] }, (started) => (fx = started));

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  for (const proxy of proxies.reverse()) await proxy.close();
  proxies = [];
});

async function mirrored(wallet: Address): Promise<boolean> {
  const rows = await fx.database.db.$client`SELECT 1 FROM registry_sponsored_wallets WHERE wallet_address = ${wallet.toLowerCase()}`;
  return rows.length > 0;
}

async function cursor(): Promise<bigint> {
  return (await readRegistryCursor(fx.database.db, fx.deployment.registryAddress)) ?? 0n;
}

async function lagging(): Promise<LaggingRpcProxy> {
  const proxy = await startLaggingRpcProxy(fx.anvil.rpcUrl);
  proxies.push(proxy);
  return proxy;
}

describe("the registry's mirror behind an endpoint that lags", () => {
  it("reads the logs from an endpoint that knows the range's last block: a wallet sponsored in a block the first endpoint does not know is mirrored", async () => {
    const behind = await lagging();
    const frozenAt = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    behind.freeze(frozenAt);
    // Counted in front of the lagging endpoint: it is asked for the logs first (one block behind, within
    // LAGGING_BLOCKS, so reads still ask it first).
    const first = await startCountingRpcProxy(behind.url);
    proxies.push(first);
    const wallet = randomWallet();
    const block = await sponsorOnChain(fx, wallet);
    expect(block).toBe(frozenAt + 1n);

    worker = await startInProcessWorker(fx, { RPC_URL: `${first.url},${fx.anvil.rpcUrl}` });
    await waitFor("the mirror's cursor to pass the wallet's block", async () => (await cursor()) > block);
    // Before: the first endpoint's answer, cut at its head, was taken for the whole range; the cursor passed the
    // wallet's block without it.
    expect(await mirrored(wallet)).toBe(true);
    expect(first.byMethod().eth_getLogs).toBeGreaterThanOrEqual(1);
    expect(worker.ctx.chain.endpoints.map((e) => e.behind)).toEqual([false, false]);
  }, 60_000);

  it("with one endpoint whose batches a node behind answers (a pool), stops the cursor at that node's head, and mirrors the wallet once the node knows its block", async () => {
    const behind = await lagging();
    const frozenAt = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    behind.freeze(frozenAt);
    // One RPC_URL, two nodes: lone calls (the worker's head) reach the current node, batches the one behind.
    let batchedLogs = 0;
    const logBatches: string[][] = [];
    const pool = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
      if (!body.trimStart().startsWith("[")) return undefined;
      const methods = (JSON.parse(body) as { method: string }[]).map((call) => call.method);
      if (methods.includes("eth_getLogs")) {
        batchedLogs++;
        logBatches.push(methods);
      }
      const answer = await fetch(behind.url, { method: "POST", headers: { "content-type": "application/json" }, body });
      return { status: answer.status, body: await answer.text() };
    });
    proxies.push(pool);
    const wallet = randomWallet();
    const block = await sponsorOnChain(fx, wallet);
    expect(block).toBe(frozenAt + 1n);

    worker = await startInProcessWorker(fx, { RPC_URL: pool.url });
    // Two passes of the index (REGISTRY_INDEX_INTERVAL_MS apart) while the node is behind: the cursor stays at the
    // first block it does not know. Before: at the surveyed head's next block, the wallet's block skipped for good.
    await waitFor("two passes of the registry index, or the cursor past the wallet's block", async () => batchedLogs >= 2 || (await cursor()) > block, 40_000);
    expect(await cursor()).toBe(frozenAt + 1n);
    expect(await mirrored(wallet)).toBe(false);
    // The node's head travels with the logs, before them: what it answers is what that node knew.
    expect(logBatches[0]).toEqual(["eth_blockNumber", "eth_getLogs"]);

    behind.freeze(undefined);
    await waitFor("the mirror to hold the wallet", async () => await mirrored(wallet), 30_000);
    expect(await cursor()).toBeGreaterThan(block);
  }, 90_000);
});
