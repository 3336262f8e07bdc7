import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { EndpointBreaker, type EndpointBreakerOptions } from "@/lib/chain/endpoint-breaker";
import { log } from "@/lib/log";
import type { ChainReader } from "./service";

/**
 * A ChainReader over JSON-RPC with viem. Batching puts one scrape's reads (treasury balance and amount, each
 * relayer's nonce and balance) into one HTTP request; no retries, the scrape has its own timeout. Several endpoints
 * (RPC_URL as a list) go through the clients' failover (lib/chain/clients.ts): an endpoint that was not reached
 * cools off and later scrapes ask the others first. With viem's `fallback`, which asked the endpoints in their fixed
 * order, a silent first endpoint cost every scrape its whole timeout and the chain's series were never there.
 *
 * With `chainId` (CHAIN_ID, or the deployment's) and several endpoints, only endpoints that answered that chain id
 * are read, as the worker's reads (decisions.md "Several RPC endpoints"): one of another chain (a mainnet URL beside
 * the testnet's) answered the scrapes first, and its balances (the treasury's 0 there) set off SponsorshipTreasuryLow.
 * Until some endpoint has answered the chain id, each scrape asks the endpoints not known yet for it first, and reads
 * nothing (the chain's series are left out) when none serves the chain.
 */
export function createViemChainReader(
  rpcUrl: string | readonly string[],
  options: { timeoutMs?: number; chainId?: number; batchSize?: number } = {},
): ChainReader {
  const timeoutMs = options.timeoutMs ?? 3000;
  const urls = typeof rpcUrl === "string" ? [rpcUrl] : [...rpcUrl];
  const chainId = options.chainId;
  // Told once per endpoint: the operator's RPC_URL lists a wrong one, which /health names too.
  const onChange: EndpointBreakerOptions["onChange"] = (index, _endpoint, change) => {
    if (change.kind === "other_chain") {
      log.warn("metrics: an RPC endpoint serves another chain; the chain series are not read from it", {
        endpoint: index + 1,
        chainId: change.chainId,
        expectedChainId: change.expectedChainId,
      });
    }
  };
  const breaker = urls.length > 1 && chainId !== undefined ? new EndpointBreaker(urls, { reprobe: "reads", probeMs: timeoutMs, onChange }) : undefined;
  breaker?.useChain(chainId!);
  const client = createChainClients({
    rpcUrl,
    timeoutMs,
    retryCount: 0,
    batchSize: options.batchSize,
    ...(breaker ? { endpoints: breaker } : {}),
  }).publicClient;
  // One client per endpoint for its chain id alone, made once (a scrape may ask again until one serves the chain).
  const idClients = breaker ? urls.map((url) => createChainClients({ rpcUrl: url, timeoutMs, retryCount: 0, batch: false }).publicClient) : [];
  const serving = () => breaker!.endpoints.some((e) => e.chainId === chainId);
  let checking: Promise<void> | undefined;
  // The endpoints whose chain id is not known, asked at once; done as soon as one answers this chain, or all have answered.
  const check = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const unknown = breaker!.endpoints.flatMap((e, i) => (e.chainId === undefined && !e.otherChain ? [i] : []));
      let left = unknown.length;
      if (left === 0) return resolve();
      for (const index of unknown) {
        idClients[index]!.getChainId()
          .then((id) => breaker!.noteChainId(index, id))
          .catch(() => undefined)
          .finally(() => (serving() || --left === 0) && resolve());
      }
    });
  const verified = async (): Promise<void> => {
    if (!breaker || serving()) return;
    await (checking ??= check().finally(() => (checking = undefined)));
    if (!serving()) throw new Error(`no RPC endpoint has answered chain id ${chainId} yet`);
  };
  return {
    getBalance: async (address) => (await verified(), client.getBalance({ address })),
    getMinedNonce: async (address) => (await verified(), client.getTransactionCount({ address, blockTag: "latest" })),
    getSponsorAmount: async (treasury) => (await verified(), client.readContract({ address: treasury, abi: treasuryAbi, functionName: "amount" })),
  };
}
