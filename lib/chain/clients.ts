import {
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  type Account,
  type Chain,
  type HttpTransport,
  type PublicClient,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { getConfig } from "@/lib/config";

/**
 * viem clients built from the configuration. The polling interval is explicit: viem's default (4 s) would make
 * every receipt wait on a local chain last seconds. JSON-RPC batching is on, so reads issued together (balances
 * of every relayer, the treasury's state) travel in one HTTP request.
 */

export type ChainClientOptions = {
  rpcUrl: string;
  /** Known chain id; when absent the clients have no chain attached (reads work, writes need `walletClient`). */
  chainId?: number;
  /** Default: 100 ms for a loopback RPC (local anvil), 1,000 ms otherwise. */
  pollingIntervalMs?: number;
  /** HTTP timeout per request. Default 10,000 ms. */
  timeoutMs?: number;
  /** Retries of a failed HTTP request (viem's backoff). Default 3. */
  retryCount?: number;
  /**
   * How long a JSON-RPC call waits for others to travel with it in one batch. Default 0: calls issued in the same
   * tick share a request. A few milliseconds gather calls from concurrent HTTP requests (the eligibility check).
   */
  batchWaitMs?: number;
  /** The transport's `fetch` (default: the global one), e.g. lib/chain/node-fetch.ts. */
  fetchFn?: typeof fetch;
  /** The transport's cap on an answer's size (viem's default 10 MB); `false` when `fetchFn` enforces its own. */
  maxResponseBodySize?: number | false;
};

export type ChainPublicClient = PublicClient<HttpTransport, Chain | undefined>;
export type RelayerWalletClient = WalletClient<HttpTransport, Chain, Account>;

/** A public client that also carries itself as `publicClient`, and makes wallet clients on the same RPC. */
export type ChainClients = ChainPublicClient & {
  publicClient: ChainPublicClient;
  rpcUrl: string;
  /** A wallet client signing locally with `privateKey`; needs the chain id (from options or `getChainId`). */
  walletClient: (privateKey: `0x${string}`, chainId?: number) => RelayerWalletClient;
};

export function isLoopbackRpc(rpcUrl: string): boolean {
  const host = new URL(rpcUrl).hostname;
  return host === "127.0.0.1" || host === "localhost" || host === "[::1]" || host === "::1";
}

/** A viem chain for an id: anvil's conventional id gets a "Local chain" name, others a generic one. */
export function chainFromId(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 31337 ? "Local chain" : `Chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export function createChainClients(options: ChainClientOptions): ChainClients {
  const { rpcUrl } = options;
  const pollingInterval = options.pollingIntervalMs ?? (isLoopbackRpc(rpcUrl) ? 100 : 1_000);
  const transport = http(rpcUrl, {
    batch: { batchSize: 200, wait: options.batchWaitMs ?? 0 },
    timeout: options.timeoutMs ?? 10_000,
    retryCount: options.retryCount ?? 3,
    ...(options.fetchFn ? { fetchFn: options.fetchFn } : {}),
    ...(options.maxResponseBodySize !== undefined ? { maxResponseBodySize: options.maxResponseBodySize } : {}),
  });
  const chain: Chain | undefined = options.chainId === undefined ? undefined : chainFromId(options.chainId, rpcUrl);
  const publicClient: ChainPublicClient = createPublicClient({ transport, chain, pollingInterval });
  const walletClient = (privateKey: `0x${string}`, chainId?: number): RelayerWalletClient => {
    const id = chainId ?? options.chainId;
    if (id === undefined) throw new Error("walletClient needs a chain id: pass it, or create the clients with chainId");
    return createWalletClient({
      account: privateKeyToAccount(privateKey),
      chain: chain?.id === id ? chain : chainFromId(id, rpcUrl),
      transport,
      pollingInterval,
    });
  };
  // `extend` returns a new client with the extra members; `publicClient` is the plain client underneath.
  return publicClient.extend(() => ({ publicClient, rpcUrl, walletClient })) as unknown as ChainClients;
}

let cached: { key: string; clients: ChainClients } | undefined;

/**
 * The process's clients for `RPC_URL` (and `CHAIN_ID` when set), created once. Throws when no RPC is configured
 * (`npm start` sets RPC_URL for its children when it starts the local chain).
 */
export function getChainClients(): ChainClients {
  const config = getConfig();
  if (!config.rpcUrl) throw new Error("RPC_URL is not set: no chain configured");
  const key = `${config.rpcUrl}|${config.chainId ?? ""}`;
  if (cached?.key !== key) {
    cached = { key, clients: createChainClients({ rpcUrl: config.rpcUrl, chainId: config.chainId }) };
  }
  return cached.clients;
}

/** The process's public client (see `getChainClients`). */
export function getPublicClient(): ChainPublicClient {
  return getChainClients().publicClient;
}
