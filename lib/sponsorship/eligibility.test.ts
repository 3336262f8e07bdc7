import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileSolidity } from "@/contracts/compile";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import type { Anvil } from "@/contracts/anvil";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { callApi, expectProblem, randomAddress, reconfigure, setupApiTestContext } from "@/lib/http/test-client";
import { startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { startRpcProxy } from "@/test/rpc-proxy";
import { checkSponsoredOnChain, registrySponsoredReader } from "./eligibility";
import { sponsorshipRequestResponse } from "./schemas";

/**
 * The eligibility read at creation (issue item 7): the registry's isSponsored, through a minimal ABI, so any
 * contract exposing `isSponsored(address)` works; an unreachable chain does not stop a request.
 */

const ctx = setupApiTestContext();
let chain: Anvil;
let deployment: { registryAddress: `0x${string}`; treasuryAddress: `0x${string}` };
let stubAddress: `0x${string}`;
const sponsoredWallet = randomAddress();
const stubMarkedWallet = randomAddress();

const STUB_SOURCE = `// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;
/// Not the service's registry: any contract with isSponsored(address) will do.
contract AnyRegistry {
  mapping(address => bool) public isSponsored;
  function mark(address wallet) external { isSponsored[wallet] = true; }
}`;

beforeAll(async () => {
  chain = await startTestChain();
  const relayerKey = LOCAL_RELAYER_KEYS[0]!;
  const deployed = await deployContracts({
    rpcUrl: chain.rpcUrl,
    deployerKey: LOCAL_DEPLOYER_KEY,
    relayers: [addressOfKey(relayerKey)],
    sponsorAmountWei: 10n ** 16n,
    fundWei: 10n ** 18n,
  });
  deployment = { registryAddress: deployed.registryAddress, treasuryAddress: deployed.treasuryAddress };
  const clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: deployed.chainId });
  // Sponsor one wallet for real: the treasury marks it in the registry.
  const relayer = clients.walletClient(relayerKey);
  const sponsorHash = await relayer.writeContract({
    address: deployed.treasuryAddress,
    abi: treasuryAbi,
    functionName: "sponsor",
    args: [sponsoredWallet, requestIdHash(crypto.randomUUID())],
  });
  expect((await clients.waitForTransactionReceipt({ hash: sponsorHash })).status).toBe("success");

  const stub = compileSolidity({ "AnyRegistry.sol": STUB_SOURCE }).get("AnyRegistry")!;
  const deployer = clients.walletClient(LOCAL_DEPLOYER_KEY);
  const deployHash = await deployer.deployContract({ abi: stub.abi as never, bytecode: stub.bytecode });
  stubAddress = (await clients.waitForTransactionReceipt({ hash: deployHash })).contractAddress!;
  const markHash = await deployer.writeContract({
    address: stubAddress,
    abi: stub.abi as never,
    functionName: "mark",
    args: [stubMarkedWallet],
  });
  await clients.waitForTransactionReceipt({ hash: markHash });
}, 120_000);

afterAll(async () => {
  reconfigure(ctx, {});
  await chain?.stop();
});

async function register(address: string) {
  expect((await callApi({ path: "/wallets/register", body: { walletAddress: address } })).status).toBe(201);
}
const request = (address: string) =>
  callApi({ path: "/sponsorship/request", body: { walletAddress: address }, ip: `10.7.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}` });

describe("eligibility at creation: isSponsored on-chain", () => {
  it("answers 422 already_sponsored for a wallet the registry marks, and creates a request for one it does not", async () => {
    reconfigure(ctx, { RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: deployment.registryAddress, TREASURY_ADDRESS: deployment.treasuryAddress });
    await register(sponsoredWallet);
    expectProblem(await request(sponsoredWallet), 422, "already_sponsored");
    const fresh = randomAddress();
    await register(fresh);
    expect((await request(fresh)).status).toBe(201);
  });

  it("works against any contract that exposes isSponsored(address)", async () => {
    reconfigure(ctx, { RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: stubAddress, TREASURY_ADDRESS: deployment.treasuryAddress });
    await register(stubMarkedWallet);
    expectProblem(await request(stubMarkedWallet), 422, "already_sponsored");
    const reader = registrySponsoredReader({ rpcUrl: chain.rpcUrl, registryAddress: stubAddress });
    expect(await checkSponsoredOnChain(reader, stubMarkedWallet)).toBe("sponsored");
    expect(await checkSponsoredOnChain(reader, randomAddress())).toBe("not_sponsored");
  });

  it("sends reads issued together to the node in one JSON-RPC batch, each with its own answer", async () => {
    // A counting proxy in front of the real node: how many HTTP requests, and how many calls in them.
    let httpRequests = 0;
    let calls = 0;
    const proxy = await startRpcProxy(chain.rpcUrl, (body) => {
      httpRequests++;
      const parsed = JSON.parse(body) as unknown;
      calls += Array.isArray(parsed) ? parsed.length : 1;
      return undefined;
    });
    try {
      const reader = registrySponsoredReader({ rpcUrl: proxy.url, registryAddress: stubAddress });
      const wallets = [stubMarkedWallet, ...Array.from({ length: 19 }, () => randomAddress())];
      const answers = await Promise.all(wallets.map((wallet) => checkSponsoredOnChain(reader, wallet)));
      expect(answers).toEqual(["sponsored", ...Array<string>(19).fill("not_sponsored")]);
      expect(calls).toBe(20);
      expect(httpRequests).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it("accepts the request as pending when the chain cannot be reached", async () => {
    const deadPort = await freePort();
    reconfigure(ctx, {
      RPC_URL: `http://127.0.0.1:${deadPort}`,
      REGISTRY_ADDRESS: deployment.registryAddress,
      TREASURY_ADDRESS: deployment.treasuryAddress,
    });
    const wallet = randomAddress();
    await register(wallet);
    const answer = await request(wallet);
    expect(answer.status).toBe(201);
    expect(sponsorshipRequestResponse.parse(answer.json).status).toBe("pending");
  });

  it("treats a reader that fails or does not answer in time as unknown, never as an error", async () => {
    const failing = async () => {
      throw new Error("connection refused");
    };
    expect(await checkSponsoredOnChain(failing, randomAddress())).toBe("unknown");
    const hanging = () => new Promise<boolean>(() => {});
    const started = Date.now();
    expect(await checkSponsoredOnChain(hanging, randomAddress(), 200)).toBe("unknown");
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await checkSponsoredOnChain(undefined, randomAddress())).toBe("unknown");
  });
});
