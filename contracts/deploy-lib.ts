import { keccak256, type Hash, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { treasuryAbi, treasuryBytecode } from "@/contracts/generated/treasury";
import { createChainClients, type ChainClients, type RelayerWalletClient } from "@/lib/chain/clients";

/**
 * Deploying and administering the contracts, shared by the local chain (contracts/local-chain.ts), the real
 * network script (contracts/deploy.ts) and every test that needs contracts. One transaction deploys both: the
 * treasury's constructor creates its registry, authorises the relayers, sets the amount and takes the funding.
 */

export type DeployOptions = {
  rpcUrl: string;
  deployerKey: Hex;
  relayers: readonly Address[];
  sponsorAmountWei: bigint;
  /** Sent with the deployment (the treasury's opening balance). Default 0. */
  fundWei?: bigint;
  pollingIntervalMs?: number;
  /** JSON-RPC calls per batched request at most (RPC_BATCH_SIZE); default BATCH_SIZE. */
  batchSize?: number;
};

export type DeployResult = {
  registryAddress: Address;
  treasuryAddress: Address;
  chainId: number;
  /** Block of the deployment transaction. */
  blockNumber: bigint;
  transactionHash: Hash;
  deployer: Address;
  gasUsed: bigint;
};

/** keccak256 of the treasury's creation code: tells whether a recorded deployment came from today's contracts. */
export const TREASURY_INIT_CODE_HASH = keccak256(treasuryBytecode);

export class DeploymentError extends Error {
  override name = "DeploymentError";
}

async function waitForSuccess(clients: ChainClients, hash: Hash, what: string) {
  const receipt = await clients.waitForTransactionReceipt({ hash, timeout: 120_000 });
  if (receipt.status !== "success") throw new DeploymentError(`${what} reverted (transaction ${hash})`);
  return receipt;
}

export async function deployContracts(options: DeployOptions): Promise<DeployResult> {
  const { batchSize, pollingIntervalMs } = options;
  const probe = createChainClients({ rpcUrl: options.rpcUrl, pollingIntervalMs, batchSize });
  const chainId = await probe.getChainId();
  const clients = createChainClients({ rpcUrl: options.rpcUrl, chainId, pollingIntervalMs, batchSize });
  const wallet = clients.walletClient(options.deployerKey);

  const hash = await wallet.deployContract({
    abi: treasuryAbi,
    bytecode: treasuryBytecode,
    args: [options.sponsorAmountWei, [...options.relayers]],
    value: options.fundWei ?? 0n,
  });
  const receipt = await waitForSuccess(clients, hash, "treasury deployment");
  const treasuryAddress = receipt.contractAddress?.toLowerCase() as Address | undefined;
  if (!treasuryAddress) throw new DeploymentError(`deployment ${hash} created no contract`);
  const registryAddress = (await clients.readContract({ address: treasuryAddress, abi: treasuryAbi, functionName: "registry" })).toLowerCase() as Address;

  return {
    registryAddress,
    treasuryAddress,
    chainId,
    blockNumber: receipt.blockNumber,
    transactionHash: hash,
    deployer: wallet.account.address.toLowerCase() as Address,
    gasUsed: receipt.gasUsed,
  };
}

/** keccak256 of the code at `address`, or undefined when there is none (a reset chain). */
export async function readCodeHash(clients: Pick<ChainClients, "getCode">, address: Address): Promise<Hash | undefined> {
  const code = await clients.getCode({ address });
  return code && code !== "0x" ? keccak256(code) : undefined;
}

export type TreasuryAdmin = {
  clients: ChainClients;
  owner: RelayerWalletClient;
  treasury: Address;
};

export function treasuryAdmin(clients: ChainClients, ownerKey: Hex, treasury: Address): TreasuryAdmin {
  return { clients, owner: clients.walletClient(ownerKey), treasury };
}

/** Authorises each of `relayers` not yet authorised; returns the ones added. */
export async function authoriseRelayers(admin: TreasuryAdmin, relayers: readonly Address[]): Promise<Address[]> {
  const added: Address[] = [];
  for (const relayer of relayers) {
    const already = await admin.clients.readContract({ address: admin.treasury, abi: treasuryAbi, functionName: "isRelayer", args: [relayer] });
    if (already) continue;
    const hash = await admin.owner.writeContract({ address: admin.treasury, abi: treasuryAbi, functionName: "addRelayer", args: [relayer] });
    await waitForSuccess(admin.clients, hash, `addRelayer(${relayer})`);
    added.push(relayer);
  }
  return added;
}

/** Sets the sponsorship amount when it differs; returns whether it changed. */
export async function ensureSponsorAmount(admin: TreasuryAdmin, amountWei: bigint): Promise<boolean> {
  const current = await admin.clients.readContract({ address: admin.treasury, abi: treasuryAbi, functionName: "amount" });
  if (current === amountWei) return false;
  const hash = await admin.owner.writeContract({ address: admin.treasury, abi: treasuryAbi, functionName: "setAmount", args: [amountWei] });
  await waitForSuccess(admin.clients, hash, "setAmount");
  return true;
}

/** Sends `valueWei` from `fromKey` to the treasury (its receive() emits Funded). */
export async function fundTreasury(clients: ChainClients, fromKey: Hex, treasury: Address, valueWei: bigint): Promise<Hash> {
  const hash = await clients.walletClient(fromKey).sendTransaction({ to: treasury, value: valueWei });
  await waitForSuccess(clients, hash, "treasury funding");
  return hash;
}

export function addressOfKey(key: Hex): Address {
  return privateKeyToAccount(key).address.toLowerCase() as Address;
}
