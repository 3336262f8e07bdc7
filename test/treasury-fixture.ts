import { BaseError, ContractFunctionRevertedError, parseEther, type Abi, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients, type ChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import type { Anvil } from "@/contracts/anvil";
import { addressOfKey, deployContracts, type DeployResult } from "@/contracts/deploy-lib";

/** The contracts' tests (treasury, registry, reentrancy): a real anvil per file and the calls they make. */

export const AMOUNT = parseEther("0.01");
export const OWNER = LOCAL_DEPLOYER_KEY;
export const RELAYER = LOCAL_RELAYER_KEYS[0]!;
export const RELAYER_2 = LOCAL_RELAYER_KEYS[1]!;
/** A funded account that is neither owner nor relayer. */
export const STRANGER = LOCAL_RELAYER_KEYS[3]!;

export const freshWallet = (): Address => privateKeyToAccount(generatePrivateKey()).address;
export const newRequestId = () => crypto.randomUUID();

export type TreasuryChain = {
  chain: Anvil;
  clients: ChainClients;
  /** The shared deployment; tests that pause, drain or change it deploy their own. */
  shared: DeployResult;
  deploy(options?: { fundWei?: bigint; amount?: bigint; relayers?: Address[] }): Promise<DeployResult>;
  /** Sends a treasury transaction as `key` with a fixed gas limit (no estimation, so a reverting call is mined). */
  sendTreasury(key: Hex, treasury: Address, functionName: string, args: readonly unknown[]): ReturnType<ChainClients["waitForTransactionReceipt"]>;
  sponsor(treasury: Address, wallet: Address, requestId?: string, key?: Hex): ReturnType<ChainClients["waitForTransactionReceipt"]>;
  /** The custom error (name and arguments) a treasury call from `key` reverts with, found by simulating it. */
  revertOf(key: Hex, treasury: Address, functionName: string, args: readonly unknown[]): Promise<{ name: string | undefined; args: readonly unknown[] }>;
};

/** Starts anvil and deploys the shared contracts before the file's tests; stops it after. Fields are set in beforeAll. */
export function setUpTreasuryChain(): TreasuryChain {
  const t = {} as TreasuryChain;
  t.deploy = (options = {}) =>
    deployContracts({
      rpcUrl: t.chain.rpcUrl,
      deployerKey: OWNER,
      relayers: options.relayers ?? [addressOfKey(RELAYER), addressOfKey(RELAYER_2)],
      sponsorAmountWei: options.amount ?? AMOUNT,
      fundWei: options.fundWei ?? parseEther("10"),
      pollingIntervalMs: 50,
    });
  t.sendTreasury = async (key, treasury, functionName, args) => {
    const hash = await t.clients.walletClient(key).writeContract({ address: treasury, abi: treasuryAbi as Abi, functionName, args, gas: 300_000n });
    return t.clients.waitForTransactionReceipt({ hash });
  };
  t.sponsor = (treasury, wallet, requestId = newRequestId(), key = RELAYER) => t.sendTreasury(key, treasury, "sponsor", [wallet, requestIdHash(requestId)]);
  t.revertOf = async (key, treasury, functionName, args) => {
    try {
      await t.clients.simulateContract({ account: privateKeyToAccount(key), address: treasury, abi: treasuryAbi as Abi, functionName, args });
    } catch (error) {
      const revert = error instanceof BaseError ? error.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
      if (revert instanceof ContractFunctionRevertedError) return { name: revert.data?.errorName, args: revert.data?.args ?? [] };
      throw error;
    }
    throw new Error(`${functionName} did not revert`);
  };
  beforeAll(async () => {
    t.chain = await startTestChain();
    t.clients = createChainClients({ rpcUrl: t.chain.rpcUrl, chainId: 31337, pollingIntervalMs: 50 });
    t.shared = await t.deploy({ fundWei: parseEther("100") });
  });
  afterAll(async () => {
    await t.chain?.stop();
  });
  return t;
}
