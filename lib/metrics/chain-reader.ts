import { createPublicClient, http, parseAbi } from "viem";
import type { ChainReader } from "./service";

/** The treasury's one view the metrics read; the full typed ABI lives in contracts/generated/treasury.ts. */
const amountAbi = parseAbi(["function amount() view returns (uint256)"]);

/**
 * A ChainReader over JSON-RPC with viem. Batching puts one scrape's reads (treasury balance and amount, each
 * relayer's nonce and balance) into one HTTP request.
 */
export function createViemChainReader(rpcUrl: string, options: { timeoutMs?: number } = {}): ChainReader {
  const client = createPublicClient({ transport: http(rpcUrl, { batch: true, timeout: options.timeoutMs ?? 3000, retryCount: 0 }) });
  return {
    getBalance: (address) => client.getBalance({ address }),
    getMinedNonce: (address) => client.getTransactionCount({ address, blockTag: "latest" }),
    getSponsorAmount: (treasury) => client.readContract({ address: treasury, abi: amountAbi, functionName: "amount" }),
  };
}
