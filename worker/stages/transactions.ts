import { getAbiItem, InvalidAddressError, isAddress, keccak256, toFunctionSelector, type Address, type Hash, type Hex, type PrivateKeyAccount } from "viem";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { requestIdHash } from "@/lib/chain/ids";
import { SPONSOR_GAS_LIMIT } from "@/lib/chain/treasury";
import type { Fees } from "../chain-answers";

/**
 * Transactions are signed locally with everything explicit (nonce, gas, fees), so the worker knows the hash and
 * holds the raw bytes before anything leaves the process: both are stored, then broadcast.
 */

/** Gas limit of `sponsor` (lib/chain/treasury: about 90,000 measured, the rest headroom for contract wallets). */
export { SPONSOR_GAS_LIMIT };
/** A plain transfer (the nonce fill: zero value to the relayer itself). */
export const FILL_GAS_LIMIT = 21_000n;

export type SignedTransaction = { raw: Hex; hash: Hash };

/** `sponsor(address,bytes32)`'s selector, computed once (encodeFunctionData hashes the signature on every call). */
const SPONSOR_SELECTOR = toFunctionSelector(getAbiItem({ abi: treasuryAbi, name: "sponsor" }));

/**
 * The calldata of `sponsor(wallet, requestIdHash(requestId))`, byte for byte what viem's encodeFunctionData gives
 * (two static words after the selector: the address left-padded, lowercase, and the 32-byte hash), without
 * looking the function up in the ABI and hashing its signature on every attempt (bench/worker-sign.ts).
 */
export function encodeSponsorCall(wallet: Address, requestId: string): Hex {
  if (!isAddress(wallet)) throw new InvalidAddressError({ address: wallet });
  return `${SPONSOR_SELECTOR}${wallet.slice(2).toLowerCase().padStart(64, "0")}${requestIdHash(requestId).slice(2)}`;
}

export async function signSponsorTransaction(
  account: PrivateKeyAccount,
  tx: { chainId: number; treasury: Address; nonce: number; fees: Fees; wallet: Address; requestId: string },
): Promise<SignedTransaction> {
  const raw = await account.signTransaction({
    type: "eip1559",
    chainId: tx.chainId,
    nonce: tx.nonce,
    to: tx.treasury,
    value: 0n,
    gas: SPONSOR_GAS_LIMIT,
    maxFeePerGas: tx.fees.maxFeePerGas,
    maxPriorityFeePerGas: tx.fees.maxPriorityFeePerGas,
    data: encodeSponsorCall(tx.wallet, tx.requestId),
  });
  return { raw, hash: keccak256(raw) };
}

/** A zero-value transfer from the relayer to itself at `nonce`: consumes the nonce, sponsors nothing. */
export async function signFillTransaction(
  account: PrivateKeyAccount,
  tx: { chainId: number; nonce: number; fees: Fees; gas?: bigint },
): Promise<SignedTransaction> {
  const raw = await account.signTransaction({
    type: "eip1559",
    chainId: tx.chainId,
    nonce: tx.nonce,
    to: account.address,
    value: 0n,
    gas: tx.gas ?? FILL_GAS_LIMIT,
    maxFeePerGas: tx.fees.maxFeePerGas,
    maxPriorityFeePerGas: tx.fees.maxPriorityFeePerGas,
  });
  return { raw, hash: keccak256(raw) };
}

/** +12.5%, rounded up and at least +1 wei: above the +10% nodes require to replace a transaction at its nonce. */
function bump(value: bigint): bigint {
  const raised = value + (value + 7n) / 8n;
  return raised > value ? raised : value + 1n;
}

/**
 * Fees for a replacement at the same nonce: both fees at least 12.5% above the previous transaction's (nodes
 * refuse a replacement under +10%), and never below what the market asks now.
 */
export function bumpFees(previous: Fees, market: Fees): Fees {
  const maxPriorityFeePerGas = [bump(previous.maxPriorityFeePerGas), market.maxPriorityFeePerGas].reduce((a, b) => (a > b ? a : b));
  let maxFeePerGas = [bump(previous.maxFeePerGas), market.maxFeePerGas].reduce((a, b) => (a > b ? a : b));
  if (maxFeePerGas < maxPriorityFeePerGas) maxFeePerGas = maxPriorityFeePerGas;
  return { maxFeePerGas, maxPriorityFeePerGas };
}
