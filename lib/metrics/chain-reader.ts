import { createPublicClient, fallback, http } from "viem";
import { treasuryAbi } from "@/contracts/generated/treasury";
import type { ChainReader } from "./service";

/**
 * A ChainReader over JSON-RPC with viem. Batching puts one scrape's reads (treasury balance and amount, each
 * relayer's nonce and balance) into one HTTP request; no retries, the scrape has its own timeout.
 */
export function createViemChainReader(rpcUrl: string | readonly string[], options: { timeoutMs?: number } = {}): ChainReader {
  const urls = typeof rpcUrl === "string" ? [rpcUrl] : [...rpcUrl];
  const transports = urls.map((url) => http(url, { batch: true, timeout: options.timeoutMs ?? 3000, retryCount: 0 }));
  // Several endpoints (RPC_URL as a list): the first that answers.
  const client = createPublicClient({ transport: transports.length === 1 ? transports[0]! : fallback(transports, { rank: false, retryCount: 0 }) });
  return {
    getBalance: (address) => client.getBalance({ address }),
    getMinedNonce: (address) => client.getTransactionCount({ address, blockTag: "latest" }),
    getSponsorAmount: (treasury) => client.readContract({ address: treasury, abi: treasuryAbi, functionName: "amount" }),
  };
}
