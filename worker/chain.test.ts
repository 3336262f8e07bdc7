import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import { startLaggingRpcProxy, startRefusingRpcProxy, startRpcProxy, type LaggingRpcProxy, type RefusingRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { LOG_QUERY_BLOCKS, MIN_LOG_QUERY_BLOCKS, WorkerChain } from "./chain";
import { LogsRefusedError } from "./chain-answers";

/**
 * Settling by events after a crash or a lost receipt (confirm.ts) asks for the treasury's Sponsored events of the
 * last 10,000 blocks. Hosted RPCs refuse such wide `eth_getLogs` ranges; here the real anvil sits behind a gateway
 * that refuses any range wider than LOG_QUERY_BLOCKS, as such a provider does.
 */

let chain: Anvil;
let gateway: RpcProxy;
let logQueries = 0;
let deployment: { chainId: number; registryAddress: `0x${string}`; treasuryAddress: `0x${string}` };
const oldRequest = crypto.randomUUID();
const recentRequest = crypto.randomUUID();
const blocks: Record<string, bigint> = {};

type RpcCall = { id: number; method: string; params?: { fromBlock?: string; toBlock?: string }[] };

beforeAll(async () => {
  chain = await startTestChain();
  const relayerKey = LOCAL_RELAYER_KEYS[0]!;
  deployment = await deployContracts({
    rpcUrl: chain.rpcUrl,
    deployerKey: LOCAL_DEPLOYER_KEY,
    relayers: [addressOfKey(relayerKey)],
    sponsorAmountWei: 10n ** 15n,
    fundWei: 10n ** 18n,
  });
  const clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: deployment.chainId, pollingIntervalMs: 50 });
  const relayer = clients.walletClient(relayerKey);
  const sponsor = async (requestId: string) => {
    const wallet = `0x${crypto.randomUUID().replaceAll("-", "").padEnd(40, "1")}` as `0x${string}`;
    const hash = await relayer.writeContract({
      address: deployment.treasuryAddress,
      abi: treasuryAbi,
      functionName: "sponsor",
      args: [wallet, requestIdHash(requestId)],
    });
    blocks[requestId] = (await clients.waitForTransactionReceipt({ hash })).blockNumber;
  };
  await sponsor(oldRequest);
  // 2,500 empty blocks, in five calls with a generous timeout: anvil takes a while per block on a loaded machine
  // (one call of 2,500 passed viem's default 10 s there).
  const miner = createChainClients({ rpcUrl: chain.rpcUrl, chainId: deployment.chainId, timeoutMs: 120_000 });
  for (let i = 0; i < 5; i++) await miner.request({ method: "anvil_mine" as never, params: ["0x1f4"] as never });
  await sponsor(recentRequest);

  gateway = await startRpcProxy(chain.rpcUrl, (body) => {
    const parsed = JSON.parse(body) as RpcCall | RpcCall[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    const tooWide = calls.find((c) => {
      if (c.method !== "eth_getLogs") return false;
      logQueries++;
      const { fromBlock, toBlock } = c.params?.[0] ?? {};
      return BigInt(toBlock ?? "0x0") - BigInt(fromBlock ?? "0x0") + 1n > LOG_QUERY_BLOCKS;
    });
    if (!tooWide) return undefined;
    const refusal = { jsonrpc: "2.0", id: tooWide.id, error: { code: -32005, message: `query exceeds max block range ${LOG_QUERY_BLOCKS}` } };
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? [refusal] : refusal) };
  });
}, 120_000);

afterAll(async () => {
  await gateway?.close();
  await chain?.stop();
});

describe("WorkerChain.findSponsoredEvents", () => {
  it("finds events thousands of blocks back through an RPC that refuses wide log ranges, newest window first", async () => {
    const workerChain = new WorkerChain({ rpcUrl: gateway.url, ...deployment });
    const unknown = crypto.randomUUID();

    logQueries = 0;
    const recent = await workerChain.findSponsoredEvents([recentRequest]);
    expect(recent?.get(recentRequest)?.blockNumber).toBe(blocks[recentRequest]);
    expect(logQueries).toBe(1); // found in the newest window: no further query

    logQueries = 0;
    const all = await workerChain.findSponsoredEvents([oldRequest, recentRequest, unknown]);
    expect(all?.get(oldRequest)?.blockNumber).toBe(blocks[oldRequest]);
    expect(all?.get(recentRequest)?.blockNumber).toBe(blocks[recentRequest]);
    expect(all?.has(unknown)).toBe(false);
    // 2,500+ blocks in windows of 1,000: three queries, none refused.
    expect(logQueries).toBe(3);
  });
});

describe("WorkerChain.findSponsoredEvents with an endpoint a block behind", () => {
  let lagging: LaggingRpcProxy;
  beforeAll(async () => {
    lagging = await startLaggingRpcProxy(chain.rpcUrl);
    // It has every block but the one that holds the recent payment: a node one import behind, not yet "behind".
    lagging.freeze(blocks[recentRequest]! - 1n);
  });
  afterAll(async () => {
    await lagging?.close();
  });

  it("asks the next endpoint for a window the first has not reached, and finds the payment in it", async () => {
    // Before: the head came from the first endpoint, the search stopped at its block, and the payment that was made
    // looked missing (settleDropped then took its nonce as used by a transaction this service did not send).
    const workerChain = new WorkerChain({ rpcUrl: [lagging.url, chain.rpcUrl], ...deployment });
    const found = await workerChain.findSponsoredEvents([recentRequest], { throughBlock: blocks[recentRequest]! });
    expect(found?.get(recentRequest)?.blockNumber).toBe(blocks[recentRequest]);
  });

  it("answers 'not yet' (undefined), not 'not found', while no endpoint has reached the block searched, and notes no outage", async () => {
    const workerChain = new WorkerChain({ rpcUrl: lagging.url, ...deployment });
    expect(await workerChain.findSponsoredEvents([recentRequest], { throughBlock: blocks[recentRequest]! })).toBeUndefined();
    expect(workerChain.health.reachable).toBe(true);
  });
});

describe("WorkerChain log queries through a provider with a narrower limit", () => {
  type Range = { fromBlock?: string; toBlock?: string };
  const width = (call: { params?: unknown[] }) => {
    const { fromBlock, toBlock } = (call.params?.[0] ?? {}) as Range;
    return BigInt(toBlock ?? "0x0") - BigInt(fromBlock ?? "0x0") + 1n;
  };
  const providers: RefusingRpcProxy[] = [];
  afterEach(async () => {
    await Promise.all(providers.splice(0).map((p) => p.close()));
  });
  /** A provider in front of the chain that refuses (or not) each call as `refuse` says; closed after the test. */
  const provider = async (refuse: Parameters<typeof startRefusingRpcProxy>[1]) => {
    const proxy = await startRefusingRpcProxy(chain.rpcUrl, refuse);
    providers.push(proxy);
    return proxy;
  };

  it("halves the window while 1,000 blocks are refused, finds the events, and keeps the narrower window", async () => {
    // A provider limited to 300 blocks. Before, the refusal of the first 1,000-block window was thrown: the search
    // failed at every pass, and so did the confirm stage that asked it.
    const limited = await provider((call) =>
      call.method === "eth_getLogs" && width(call) > 300n ? { code: -32005, message: "query exceeds max block range 300" } : undefined,
    );
    const narrowed: bigint[] = [];
    const workerChain = new WorkerChain({ rpcUrl: limited.url, ...deployment, onLogWindowNarrowed: ({ blocks }) => narrowed.push(blocks) });
    const all = await workerChain.findSponsoredEvents([oldRequest, recentRequest]);
    expect(all?.get(oldRequest)?.blockNumber).toBe(blocks[oldRequest]);
    expect(all?.get(recentRequest)?.blockNumber).toBe(blocks[recentRequest]);
    // 1,000 refused, then 500 refused, then 250 answered: kept for the later queries, which are not refused.
    expect(narrowed).toEqual([250n]);
    expect(workerChain.logWindow).toBe(250n);
    const refusals = limited.refused().eth_getLogs;
    expect(refusals).toBe(2);
    await workerChain.findSponsoredEvents([oldRequest]);
    expect(limited.refused().eth_getLogs).toBe(refusals);
    expect(workerChain.health.reachable).toBe(true);
  });

  it("throws LogsRefusedError, not an outage and without narrowing, when the provider does not serve eth_getLogs", async () => {
    const refusing = await provider((call) =>
      call.method === "eth_getLogs" ? { code: -32601, message: "the method eth_getLogs does not exist/is not available" } : undefined,
    );
    const workerChain = new WorkerChain({ rpcUrl: refusing.url, ...deployment });
    await expect(workerChain.findSponsoredEvents([recentRequest])).rejects.toBeInstanceOf(LogsRefusedError);
    // Not a range limit: asked once, not narrowed.
    expect(refusing.refused().eth_getLogs).toBe(1);
    expect(workerChain.logWindow).toBe(LOG_QUERY_BLOCKS);
    expect(workerChain.health.reachable).toBe(true);
    // The registry's index reads through the same narrowing: the same refusal, the same error.
    await expect(workerChain.walletsSponsored(0n, 100n)).rejects.toBeInstanceOf(LogsRefusedError);
  });

  it("does not narrow for a rate limit: the refusal is thrown once, and the next search is answered at full width", async () => {
    let limited = 1;
    const flaky = await provider((call) =>
      call.method === "eth_getLogs" && limited-- > 0 ? { code: -32005, message: "daily request count exceeded, request rate limited" } : undefined,
    );
    const workerChain = new WorkerChain({ rpcUrl: flaky.url, ...deployment });
    await expect(workerChain.findSponsoredEvents([recentRequest])).rejects.toMatchObject({ name: "LogsRefusedError", rangeLimit: false });
    expect(workerChain.logWindow).toBe(LOG_QUERY_BLOCKS);
    expect((await workerChain.findSponsoredEvents([recentRequest]))?.get(recentRequest)?.blockNumber).toBe(blocks[recentRequest]);
  });

  it("throws LogsRefusedError when a range limit refuses even MIN_LOG_QUERY_BLOCKS blocks", async () => {
    const tiny = await provider((call) => (call.method === "eth_getLogs" ? { code: -32602, message: "block range is too wide (max 4)" } : undefined));
    const workerChain = new WorkerChain({ rpcUrl: tiny.url, ...deployment });
    await expect(workerChain.walletsSponsored(0n, 100n)).rejects.toMatchObject({ name: "LogsRefusedError", rangeLimit: true });
    // 100, 50, 25, 12 and 8 blocks refused; nothing answered, so the window is not narrowed.
    expect(tiny.refused().eth_getLogs).toBe(5);
    expect(workerChain.logWindow).toBe(LOG_QUERY_BLOCKS);
    expect(MIN_LOG_QUERY_BLOCKS).toBe(8n);
  });
});

describe("WorkerChain with one endpoint answering malformed JSON-RPC", () => {
  it("takes a null head or a null eth_call result as the chain not reached (ChainUnavailableError), not as an answer", async () => {
    const broken = await startRpcProxy(chain.rpcUrl, (body) => {
      const parsed = JSON.parse(body) as RpcCall | RpcCall[];
      const calls = Array.isArray(parsed) ? parsed : [parsed];
      if (!calls.some((c) => c.method === "eth_blockNumber" || c.method === "eth_call")) return undefined;
      const answers = calls.map((c) => ({ jsonrpc: "2.0", id: c.id, result: null }));
      return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
    });
    try {
      const workerChain = new WorkerChain({ rpcUrl: broken.url, ...deployment });
      // Before: "Cannot convert null to a BigInt" and a contract-call error, each a stage failure counted towards the
      // worker's exit, and the chain noted as reached.
      await expect(workerChain.blockNumber()).rejects.toMatchObject({ name: "ChainUnavailableError" });
      await expect(workerChain.reviewReads([addressOfKey(LOCAL_RELAYER_KEYS[1]!)])).rejects.toMatchObject({ name: "ChainUnavailableError" });
      expect(workerChain.health.reachable).toBe(false);
    } finally {
      await broken.close();
    }
  });
});
