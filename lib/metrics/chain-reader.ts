import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import type { ChainReader } from "./service";

/**
 * A ChainReader over JSON-RPC with viem. Batching puts one scrape's reads (treasury balance and amount, each
 * relayer's nonce and balance) into one HTTP request; no retries, the scrape has its own timeout. Several endpoints
 * (RPC_URL as a list) go through the clients' failover (lib/chain/clients.ts): an endpoint that was not reached
 * cools off and later scrapes ask the others first. With viem's `fallback`, which asked the endpoints in their fixed
 * order, a silent first endpoint cost every scrape its whole timeout and the chain's series were never there.
 */
export function createViemChainReader(rpcUrl: string | readonly string[], options: { timeoutMs?: number } = {}): ChainReader {
  const client = createChainClients({ rpcUrl, timeoutMs: options.timeoutMs ?? 3000, retryCount: 0 }).publicClient;
  return {
    getBalance: (address) => client.getBalance({ address }),
    getMinedNonce: (address) => client.getTransactionCount({ address, blockTag: "latest" }),
    getSponsorAmount: (treasury) => client.readContract({ address: treasury, abi: treasuryAbi, functionName: "amount" }),
  };
}
