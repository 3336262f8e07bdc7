import {
  createPublicClient,
  createTransport,
  createWalletClient,
  defineChain,
  http,
  shouldThrow,
  type Account,
  type Chain,
  type EIP1193RequestFn,
  type PublicClient,
  type Transport,
  type WalletClient,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { getConfig } from "@/lib/config";
import { EndpointBreaker, MalformedAnswerError, NoEndpointOfChainError } from "./endpoint-breaker";

/**
 * viem clients built from the configuration. The polling interval is explicit: viem's default (4 s) would make
 * every receipt wait on a local chain last seconds. JSON-RPC batching is on, so reads issued together (balances
 * of every relayer, the treasury's state) travel in one HTTP request. Several endpoints of one chain (RPC_URL as a
 * comma-separated list) go through `failover` below: each call goes to the first endpoint that answers, in the
 * configured order, except those an EndpointBreaker leaves aside (not reached lately, or behind the others).
 */

export type ChainClientOptions = {
  /** One endpoint, or several of the same chain (reads fail over in this order). */
  rpcUrl: string | readonly string[];
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
  /**
   * Default true. False: every call is its own HTTP request, sent at once. viem schedules even a lone call's batch
   * with `setTimeout`, which costs a lone call about twice the CPU (bench/worker-sign.ts); for calls made alone.
   */
  batch?: boolean;
  /**
   * JSON-RPC calls one batched HTTP request carries at most (RPC_BATCH_SIZE; default BATCH_SIZE); more are split over
   * several requests. 1: no batches (as `batch: false`), for a provider that refuses a JSON array.
   */
  batchSize?: number;
  /** The transport's `fetch` (default: the global one), e.g. lib/chain/node-fetch.ts. */
  fetchFn?: typeof fetch;
  /** The transport's cap on an answer's size (viem's default 10 MB); `false` when `fetchFn` enforces its own. */
  maxResponseBodySize?: number | false;
  /**
   * With several endpoints: the order reads ask them in, and where their answers are noted (the worker shares one
   * between its clients). Default: one of these clients' own, whose endpoints are re-probed by reads. With one
   * endpoint: reads go through it too (none while it answers another chain id than the breaker's `useChain`).
   */
  endpoints?: EndpointBreaker;
};

/** JSON-RPC calls one batched HTTP request carries at most by default (RPC_BATCH_SIZE; more are split into several requests). */
export const BATCH_SIZE = 200;

export type ChainPublicClient = PublicClient<Transport, Chain | undefined>;
export type RelayerWalletClient = WalletClient<Transport, Chain, Account>;

/** A public client that also carries itself as `publicClient`, and makes wallet clients on the same RPC. */
export type ChainClients = ChainPublicClient & {
  publicClient: ChainPublicClient;
  rpcUrl: string;
  /** Every endpoint, in order (`rpcUrl` is the first). */
  rpcUrls: readonly string[];
  /** A wallet client signing locally with `privateKey`; needs the chain id (from options or `getChainId`). */
  walletClient: (privateKey: Hex, chainId?: number) => RelayerWalletClient;
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

export function rpcUrlList(rpcUrl: string | readonly string[]): string[] {
  const urls = typeof rpcUrl === "string" ? [rpcUrl] : [...rpcUrl];
  if (urls.length === 0) throw new Error("no RPC endpoint given");
  return urls;
}

export function createChainClients(options: ChainClientOptions): ChainClients {
  const rpcUrls = rpcUrlList(options.rpcUrl);
  const rpcUrl = rpcUrls[0]!;
  const pollingInterval = options.pollingIntervalMs ?? (rpcUrls.every(isLoopbackRpc) ? 100 : 1_000);
  const batchSize = options.batchSize ?? BATCH_SIZE;
  const httpTo = (url: string, retryCount: number) =>
    checkedAnswers(
      http(url, {
        batch: options.batch === false || batchSize <= 1 ? false : { batchSize, wait: options.batchWaitMs ?? 0 },
        timeout: options.timeoutMs ?? 10_000,
        retryCount,
        ...(options.fetchFn ? { fetchFn: options.fetchFn } : {}),
        ...(options.maxResponseBodySize !== undefined ? { maxResponseBodySize: options.maxResponseBodySize } : {}),
      }),
    );
  // One endpoint: plain HTTP, but through the breaker when one is given (the worker's: while the endpoint answers
  // another chain id, reads fail as in an outage). Several: the first that answers, in the breaker's order (no latency
  // ranking: that would poll every endpoint).
  const transport: Transport =
    rpcUrls.length === 1 && options.endpoints === undefined
      ? httpTo(rpcUrl, options.retryCount ?? 3)
      : failover(
          rpcUrls.map((url) => httpTo(url, 0)),
          options.endpoints ?? new EndpointBreaker(rpcUrls, { reprobe: "reads", probeMs: options.timeoutMs ?? 10_000 }),
          options.retryCount ?? 3,
        );
  const chain: Chain | undefined = options.chainId === undefined ? undefined : chainFromId(options.chainId, rpcUrl);
  const publicClient: ChainPublicClient = createPublicClient({ transport, chain, pollingInterval });
  const walletClient = (privateKey: Hex, chainId?: number): RelayerWalletClient => {
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
  return publicClient.extend(() => ({ publicClient, rpcUrl, rpcUrls, walletClient })) as unknown as ChainClients;
}

/** Methods whose result is a hex quantity (`0x` and at least one digit) by the Ethereum JSON-RPC specification. */
const QUANTITY_METHODS = new Set([
  "eth_blockNumber",
  "eth_chainId",
  "eth_getTransactionCount",
  "eth_getBalance",
  "eth_gasPrice",
  "eth_maxPriorityFeePerGas",
  "eth_estimateGas",
]);

/**
 * One endpoint's transport whose answers to the methods above, and to `eth_call` (whole bytes of hex, `0x` for none:
 * viem reads an odd-length answer shifted by a digit, a `true` as `false`), are
 * checked: anything else is a MalformedAnswerError, counted as the endpoint not reached, so `failover` asks the next
 * one. Until session 25 a `null` head from one endpoint failed every relay pass ("Cannot convert null to a BigInt")
 * while the next endpoint was never asked, and the worker exited after 30 of them.
 */
function checkedAnswers(transport: Transport): Transport {
  return (args) => {
    const endpoint = transport(args);
    const request: EIP1193RequestFn = async (call, requestOptions) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- passed on as given, as viem's own transports do
      const result: unknown = await endpoint.request(call as any, requestOptions);
      const pattern = QUANTITY_METHODS.has(call.method) ? /^0x[0-9a-fA-F]+$/ : call.method === "eth_call" ? /^0x(?:[0-9a-fA-F]{2})*$/ : undefined;
      if (pattern && !(typeof result === "string" && pattern.test(result))) {
        throw new MalformedAnswerError(`${call.method} answered ${JSON.stringify(result)?.slice(0, 100)}, not hex`);
      }
      return result as never;
    };
    return { ...endpoint, request };
  };
}

/**
 * Several endpoints as one transport: a call asks the endpoints in `breaker.readOrder()`, one after the other, until
 * one answers, and notes each outcome in the breaker. As viem's `fallback` (which it replaces: its order is fixed), a
 * call the node refused in a way no other endpoint would judge otherwise (a revert, `shouldThrow`) is not asked of the
 * next. Calls issued together still travel in one batched HTTP request per endpoint (the endpoints' own transports).
 * With a chain set on the breaker (the worker's), endpoints whose chain id is not known yet are asked last, and their
 * chain id first (EndpointBreaker.unverified).
 */
function failover(transports: readonly Transport[], breaker: EndpointBreaker, retryCount: number): Transport {
  return ({ chain, timeout, ...rest }) => {
    const endpoints = transports.map((t) => t({ ...rest, chain, retryCount: 0, timeout }));
    const request: EIP1193RequestFn = async ({ method, params }, requestOptions) => {
      const ask = async (index: number): Promise<unknown> =>
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the endpoint's transport takes any JSON-RPC method, as viem's fallback passes it
        endpoints[index]!.request({ method, params } as any, requestOptions);
      // Nothing asked at all: every endpoint answers another chain id now (EndpointBreaker.noteChainId).
      let failure: unknown = new NoEndpointOfChainError(`no RPC endpoint serves chain ${breaker.chainId} now: each answers another chain id`);
      for (const index of breaker.readOrder()) {
        breaker.asking(index);
        try {
          const response = await ask(index);
          breaker.noteAnswer(index);
          return response as never;
        } catch (error) {
          breaker.noteAnswer(index, error);
          if (shouldThrow(error as Error)) throw error;
          failure = error;
        }
      }
      // Every endpoint known to serve the chain failed: one whose chain id is not known yet is asked it first, and
      // read only if it serves this chain (EndpointBreaker.unverified; one of another chain is left aside).
      for (const index of breaker.unverified()) {
        try {
          const chainId = await endpoints[index]!.request({ method: "eth_chainId" }, requestOptions);
          breaker.noteAnswer(index);
          breaker.noteChainId(index, Number(BigInt(chainId as string)));
          if (!breaker.servesChain(index)) continue;
          const response = await ask(index);
          return response as never;
        } catch (error) {
          breaker.noteAnswer(index, error);
          if (shouldThrow(error as Error)) throw error;
          failure = error;
        }
      }
      throw failure;
    };
    return createTransport({ key: "failover", name: "Failover", type: "failover", request, retryCount }, { breaker });
  };
}

let cached: { key: string; clients: ChainClients } | undefined;

/**
 * The process's clients for `RPC_URL` (and `CHAIN_ID` when set), created once. Throws when no RPC is configured
 * (`npm start` sets RPC_URL for its children when it starts the local chain).
 */
export function getChainClients(): ChainClients {
  const config = getConfig();
  if (config.rpcUrls.length === 0) throw new Error("RPC_URL is not set: no chain configured");
  const key = `${config.rpcUrls.join(",")}|${config.chainId ?? ""}|${config.rpcBatchSize}`;
  if (cached?.key !== key) {
    cached = { key, clients: createChainClients({ rpcUrl: config.rpcUrls, chainId: config.chainId, batchSize: config.rpcBatchSize }) };
  }
  return cached.clients;
}

/** The process's public client (see `getChainClients`). */
export function getPublicClient(): ChainPublicClient {
  return getChainClients().publicClient;
}
