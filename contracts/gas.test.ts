import { parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients, type ChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { SPONSOR_GAS_LIMIT, sponsorAccessList } from "@/lib/chain/treasury";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import type { Anvil } from "./anvil";
import { addressOfKey, deployContracts, type DeployResult } from "./deploy-lib";

/**
 * Gas of one sponsorship (wallet addresses and request id hashes without zero bytes, the dearest calldata), measured from real receipts on anvil (docs/performance.md, "Gas per sponsorship").
 * The bounds are regression guards: they fail when a change makes the hot path dearer.
 */

let chain: Anvil;
let clients: ChainClients;
let deployment: DeployResult;
const figures: Record<string, bigint> = {};

/** No zero byte: calldata costs 16 gas per non-zero byte and 4 per zero byte, so figures stay comparable. */
const noZeroByte = (hex: string) => !/^(?:..)*00/.test(hex.slice(2));

function freshWallet(): Address {
  for (;;) {
    const address = privateKeyToAccount(generatePrivateKey()).address;
    if (noZeroByte(address)) return address;
  }
}

function requestId(): `0x${string}` {
  for (;;) {
    const id = requestIdHash(crypto.randomUUID());
    if (noZeroByte(id)) return id;
  }
}

async function sponsorGas(wallet: Address, withAccessList = false): Promise<bigint> {
  const hash = await clients.walletClient(LOCAL_RELAYER_KEYS[0]!).writeContract({
    address: deployment.treasuryAddress,
    abi: treasuryAbi,
    functionName: "sponsor",
    args: [wallet, requestId()],
    gas: SPONSOR_GAS_LIMIT,
    accessList: withAccessList ? sponsorAccessList(deployment.registryAddress, wallet) : undefined,
  });
  const receipt = await clients.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return receipt.gasUsed;
}

beforeAll(async () => {
  chain = await startTestChain();
  clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: 31337, pollingIntervalMs: 50 });
  deployment = await deployContracts({
    rpcUrl: chain.rpcUrl,
    deployerKey: LOCAL_DEPLOYER_KEY,
    relayers: [addressOfKey(LOCAL_RELAYER_KEYS[0]!)],
    sponsorAmountWei: parseEther("0.01"),
    fundWei: parseEther("100"),
    pollingIntervalMs: 50,
  });
  figures.deployment = deployment.gasUsed;
});

afterAll(async () => {
  // The figures quoted in docs/performance.md; printed so a run shows them.
  console.error(`gas per sponsorship: ${JSON.stringify(figures, (_k, v) => (typeof v === "bigint" ? Number(v) : v))}`);
  await chain?.stop();
});

describe("gas per sponsorship", () => {
  it("a fresh (empty) wallet costs at most 90,450 gas, the EVM's new-account charge included", async () => {
    const gas = await sponsorGas(freshWallet());
    figures.freshWallet = gas;
    expect(gas).toBeLessThanOrEqual(90_450n);
  });

  it("a wallet that already holds a balance costs exactly 25,000 less (no new-account charge)", async () => {
    const wallet = freshWallet();
    const hash = await clients.walletClient(LOCAL_DEPLOYER_KEY).sendTransaction({ to: wallet, value: 1n });
    await clients.waitForTransactionReceipt({ hash });
    const gas = await sponsorGas(wallet);
    figures.fundedWallet = gas;
    expect(gas).toBeLessThanOrEqual(65_450n);
    expect((figures.freshWallet ?? 0n) - gas).toBe(25_000n);
  });

  it("the access list of sponsorAccessList saves gas", async () => {
    const gas = await sponsorGas(freshWallet(), true);
    figures.freshWalletWithAccessList = gas;
    expect(gas).toBeLessThan(figures.freshWallet!);
  });

  it("every sponsorship costs the same: the registry does not grow dearer with use", async () => {
    const gases: bigint[] = [];
    for (let i = 0; i < 20; i++) gases.push(await sponsorGas(freshWallet()));
    expect(new Set(gases).size).toBe(1);
    expect(gases[0]).toBe(figures.freshWallet);
    figures.perBlock30M = 30_000_000n / gases[0]!;
  });
});
