import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { WorkerChain } from "./chain";

/**
 * The head (`eth_blockNumber`) is always asked alone (the busy loop's poll, the relay round, the confirm pass), so it
 * travels as one plain JSON-RPC request sent at once, not as a one-element batch that viem schedules on a timer
 * (about twice the CPU per call: bench/worker-sign.ts, docs/performance.md "Session 6: cuts"). The answer, the
 * endpoints' failover and their reachability are the same as for every other read.
 */

let chain: Anvil;
let proxy: RpcProxy;
const bodies: string[] = [];
const addresses = { registryAddress: "0x5fbdb2315678afecb367f032d93f642f64180aa3", treasuryAddress: "0xe7f1725e7734ce288f8367e1bb143e90bb3f0512" } as const;

beforeAll(async () => {
  chain = await startTestChain();
  proxy = await startRpcProxy(chain.rpcUrl, (body) => {
    bodies.push(body);
    return undefined;
  });
});

afterAll(async () => {
  await proxy?.close();
  await chain?.stop();
});

describe("the head read", () => {
  it("is sent as one JSON-RPC request on its own, not as a batch, and answers the node's block number", async () => {
    const workerChain = new WorkerChain({ rpcUrl: proxy.url, chainId: 31337, ...addresses });
    bodies.length = 0;
    const head = await workerChain.blockNumber();
    const direct = await fetch(chain.rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}',
    });
    expect(head).toBe(BigInt(((await direct.json()) as { result: string }).result));
    expect(bodies).toHaveLength(1);
    const sent = JSON.parse(bodies[0]!) as unknown;
    expect(Array.isArray(sent)).toBe(false);
    expect(sent).toMatchObject({ jsonrpc: "2.0", method: "eth_blockNumber" });
  });

  it("fails over to the next endpoint like every other read, and marks the unreachable one down", async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const workerChain = new WorkerChain({ rpcUrl: [dead, proxy.url], chainId: 31337, ...addresses });
    bodies.length = 0;
    expect(await workerChain.blockNumber()).toBeGreaterThanOrEqual(0n);
    expect(workerChain.endpoints.map((e) => e.reachable)).toEqual([false, true]);
    expect(bodies.map((b) => Array.isArray(JSON.parse(b)))).toEqual([false]);
  });
});
