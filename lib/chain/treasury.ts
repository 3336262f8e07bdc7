import {
  BaseError,
  ContractFunctionRevertedError,
  encodeAbiParameters,
  keccak256,
  parseEventLogs,
  type AccessList,
  type Address,
  type Hex,
  type Log,
  type PublicClient,
} from "viem";
import { treasuryAbi } from "@/contracts/generated/treasury";

/** Reads of the SponsorshipTreasury and of account balances, for the worker, health and the dashboard. */
export type TreasuryReader = Pick<PublicClient, "readContract" | "getBalance">;

export type TreasuryState = {
  /** Native balance held by the treasury, in wei. */
  balance: bigint;
  /** Wei paid per sponsorship. */
  amount: bigint;
  paused: boolean;
};

/** Balance, amount and pause flag; the three reads leave together (one batched JSON-RPC request). */
export async function readTreasuryState(client: TreasuryReader, treasury: Address): Promise<TreasuryState> {
  const [balance, amount, paused] = await Promise.all([
    client.getBalance({ address: treasury }),
    client.readContract({ address: treasury, abi: treasuryAbi, functionName: "amount" }),
    client.readContract({ address: treasury, abi: treasuryAbi, functionName: "paused" }),
  ]);
  return { balance, amount, paused };
}

/** Native balances of many accounts (relayers), keyed by lowercase address; one batched JSON-RPC request. */
export async function readAccountBalances(client: Pick<PublicClient, "getBalance">, addresses: readonly Address[]): Promise<Map<string, bigint>> {
  const unique = [...new Set(addresses.map((a) => a.toLowerCase() as Address))];
  const balances = await Promise.all(unique.map((address) => client.getBalance({ address })));
  return new Map(unique.map((address, i) => [address, balances[i]!]));
}

export async function readIsRelayer(client: Pick<PublicClient, "readContract">, treasury: Address, account: Address): Promise<boolean> {
  return client.readContract({ address: treasury, abi: treasuryAbi, functionName: "isRelayer", args: [account] });
}

/**
 * The revert in a viem error from a treasury call or simulation: its custom error (`"AlreadySponsored"`,
 * `"TreasuryPaused"`, `"InsufficientBalance"`, ...) and arguments when the contract gave one, a plain revert
 * otherwise; undefined when the error is not a revert (the node could not be asked).
 */
export function describeRevert(error: unknown): { errorName?: string; text: string } | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const revert = error.walk((e) => e instanceof ContractFunctionRevertedError);
  if (!(revert instanceof ContractFunctionRevertedError)) return undefined;
  if (revert.data?.errorName) {
    const args = (revert.data.args ?? []).map((a) => String(a)).join(", ");
    return { errorName: revert.data.errorName, text: `reverted: ${revert.data.errorName}(${args})` };
  }
  return { text: `reverted: ${revert.reason ?? "no reason given"}` };
}

export type SponsoredEvent = {
  wallet: Address;
  /** keccak256 of the request's 16-byte UUID (`requestIdHash` in lib/chain/ids.ts); the id itself is never on-chain. */
  requestIdHash: Hex;
  amount: bigint;
  relayer: Address;
  transactionHash: Hex | null;
  logIndex: number | null;
};

/** The `Sponsored` events among a receipt's logs (only those emitted by `treasury`). */
export function parseSponsoredEvents(logs: readonly Log[], treasury: Address): SponsoredEvent[] {
  return parseEventLogs({ abi: treasuryAbi, eventName: "Sponsored", logs: [...logs] })
    .filter((log) => log.address.toLowerCase() === treasury.toLowerCase())
    .map((log) => ({
      wallet: log.args.wallet.toLowerCase() as Address,
      requestIdHash: log.args.requestIdHash,
      amount: log.args.amount,
      relayer: log.args.relayer.toLowerCase() as Address,
      transactionHash: log.transactionHash,
      logIndex: log.logIndex,
    }));
}

/**
 * A gas limit that covers one `sponsor` call with room to spare (measured: about 90,000 for a fresh wallet,
 * docs/performance.md), so a relayer can skip eth_estimateGas. A recipient contract whose receive() needs more
 * than the spare makes the call revert with TransferFailed; estimate for those.
 */
export const SPONSOR_GAS_LIMIT = 150_000n;

/**
 * An EIP-2930 access list for `sponsor(wallet, ...)`: the registry, the wallet's registry slot and the wallet.
 * Optional; it saves about 300 gas per sponsorship (listing the treasury itself would cost more than it saves,
 * the transaction's `to` is warm already).
 */
export function sponsorAccessList(registry: Address, wallet: Address): AccessList {
  // SponsorshipRegistry keeps `mapping(address => bool)` in storage slot 0.
  const slot = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [wallet, 0n]));
  return [
    { address: registry, storageKeys: [slot] },
    { address: wallet, storageKeys: [] },
  ];
}
