import {
  encodeEventTopics,
  formatLog,
  hexToBigInt,
  hexToNumber,
  numberToHex,
  parseEventLogs,
  type Address,
  type Hash,
  type Hex,
  type Log,
  type RpcLog,
} from "viem";
import { registryAbi } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { BATCH_SIZE, createChainClients, rpcUrlList, type ChainPublicClient } from "@/lib/chain/clients";
import { EndpointBreaker, EndpointSilentError, LAGGING_BLOCKS, LAGGING_MS, NoEndpointOfChainError, type EndpointChange } from "@/lib/chain/endpoint-breaker";
import { requestIdHash } from "@/lib/chain/ids";
import { createNodeFetch } from "@/lib/chain/node-fetch";
import { readAreSponsored } from "@/lib/chain/registry";
import { describeRevert, readIsRelayer, readTreasuryState, SPONSOR_GAS_LIMIT, type TreasuryState } from "@/lib/chain/treasury";
import { withTimeout } from "@/lib/with-timeout";
import { FatalWorkerError } from "./errors";
import {
  ChainHealth,
  ChainUnavailableError,
  LogsRefusedError,
  classifyBroadcastError,
  combineBroadcastOutcomes,
  isUnreachable,
  messageOf,
  reach,
  type BroadcastOutcome,
  type EndpointState,
  type MarketFees,
  type MinedReceipt,
  type RelayerNonces,
} from "./chain-answers";

/** A revert of the treasury's `sponsor`: its custom error's name when it gave one, and a text for the logs. */
export type SponsorRevert = { errorName?: string; text: string };

/**
 * The worker's view of the chain: every read it needs, batched (viem's JSON-RPC batching: calls issued together
 * travel in one HTTP request), no caching (viem caches eth_blockNumber by default; the worker must not), and every
 * failure to reach the node turned into ChainUnavailableError so the loop can back off without burning attempts.
 */

type RpcReceipt = { status: Hex; blockNumber: Hex; gasUsed: Hex } | null;

function toReceipts(hashes: readonly Hash[], answers: readonly RpcReceipt[]): Map<Hash, MinedReceipt | null> {
  return new Map(
    hashes.map((hash, i) => {
      const r = answers[i];
      if (!r) return [hash, null];
      return [
        hash,
        { status: hexToBigInt(r.status) === 1n ? "success" : "reverted", blockNumber: hexToBigInt(r.blockNumber), gasUsed: hexToBigInt(r.gasUsed) },
      ];
    }),
  );
}

export type WorkerChainOptions = {
  /** One endpoint, or several of the same chain: reads fail over in order, broadcasts go to all. */
  rpcUrl: string | readonly string[];
  chainId: number;
  registryAddress: Address;
  treasuryAddress: Address;
  /** Where the registry's events start (its deployment block), when the deployment says. */
  registryFromBlock?: bigint;
  /** Per HTTP request; a stopped node is noticed after this long. */
  timeoutMs?: number;
  /** JSON-RPC calls per batched HTTP request at most (RPC_BATCH_SIZE); default BATCH_SIZE. */
  batchSize?: number;
  health?: ChainHealth;
  /** The endpoints' breakers (workerEndpoints), when start-up's reads shared them; else new ones. */
  endpoints?: EndpointBreaker;
  /** Called when a range refused as too large was answered narrower, which becomes WorkerChain.logWindow. */
  onLogWindowNarrowed?: (change: { blocks: bigint; refusedBlocks: bigint; error: string }) => void;
};

/** Per HTTP request of the worker: a node that does not answer is given up after this long. */
export const ENDPOINT_TIMEOUT_MS = 5_000;

/**
 * How long a survey of every endpoint (askEach) waits for the others once one has answered. One still silent then
 * is left aside by reads until it answers: the worker's start-up and its maintenance checks do not wait out the
 * timeout of an endpoint that accepts connections and never answers.
 */
export const SURVEY_GRACE_MS = 1_000;

/**
 * The longest a stage waits on the chain inside a database transaction (review, relay: rows locked meanwhile). Well
 * under the server's idle_in_transaction_session_timeout (15 s, worker.ts), which ended such a transaction while
 * reads failed over from endpoint to endpoint and the stage was logged as a database outage; past it the stage fails
 * as a chain outage (ChainUnavailableError), its transaction is rolled back and the loop backs off.
 */
export const CHAIN_WAIT_IN_TRANSACTION_MS = 6_000;

/** `read`, or a ChainUnavailableError once it has taken CHAIN_WAIT_IN_TRANSACTION_MS (it is not cancelled). */
export function withinTransactionWait<T>(what: string, read: Promise<T>, ms = CHAIN_WAIT_IN_TRANSACTION_MS): Promise<T> {
  return withTimeout(read, ms, () => new ChainUnavailableError(`${what}: no answer from the chain within ${ms} ms while the stage's rows were locked`));
}

/**
 * The worker's breakers over RPC_URL's endpoints (lib/chain/endpoint-breaker.ts): re-probed only by its surveys
 * (the heads at each maintenance check), so no read of a stage waits on an endpoint that may still be silent.
 */
export function workerEndpoints(rpcUrl: string | readonly string[], onChange?: (index: number, url: string, change: EndpointChange) => void): EndpointBreaker {
  return new EndpointBreaker(rpcUrlList(rpcUrl), { reprobe: "survey", probeMs: ENDPOINT_TIMEOUT_MS, onChange: (i, e, change) => onChange?.(i, e.url, change) });
}

/**
 * Asks every endpoint the breaker's survey targets, each on its own and all at once, and returns the answers by
 * endpoint index: once every one has answered (or failed), or SURVEY_GRACE_MS after the first answer, whichever comes
 * first. An endpoint still silent then is noted as not reached (EndpointSilentError: reads leave it aside until it
 * answers); its own answer, when it comes, is noted too. With no answer at all: the first failure, as the caller's.
 */
export async function askEach<T>(
  breaker: EndpointBreaker,
  clients: readonly ChainPublicClient[],
  ask: (client: ChainPublicClient, index: number) => Promise<T>,
): Promise<{ answers: Map<number, T>; errors: unknown[] }> {
  const targets = breaker.surveyTargets();
  const answers = new Map<number, T>();
  const errors: unknown[] = [];
  const pending = new Set(targets);
  // The grace period starts at the first answer, once.
  let graceTimer: NodeJS.Timeout | undefined;
  let firstAnswer: () => void = () => {};
  const grace = new Promise<void>((resolve) => (firstAnswer = () => void (graceTimer ??= setTimeout(resolve, SURVEY_GRACE_MS))));
  const all = Promise.all(
    targets.map(async (index) => {
      breaker.asking(index);
      try {
        const value = await ask(clients[index]!, index);
        breaker.noteAnswer(index);
        if (pending.delete(index)) answers.set(index, value);
        firstAnswer();
      } catch (error) {
        breaker.noteAnswer(index, error);
        if (pending.delete(index)) errors.push(error);
      }
    }),
  );
  await Promise.race([all, grace]);
  clearTimeout(graceTimer);
  firstAnswer = () => {};
  for (const index of pending) breaker.noteAnswer(index, new EndpointSilentError(`no answer within ${SURVEY_GRACE_MS} ms of another endpoint's`));
  pending.clear();
  return { answers, errors };
}

/**
 * Blocks per `eth_getLogs` query: hosted RPCs refuse wider ranges (commonly 1,000 to 10,000 blocks, some 500 or
 * fewer). A range every endpoint refuses as too large is halved and asked again, down to MIN_LOG_QUERY_BLOCKS, and
 * the width that was answered is kept for the next queries (WorkerChain.logWindow).
 */
export const LOG_QUERY_BLOCKS = 1_000n;
export const MIN_LOG_QUERY_BLOCKS = 8n;
/**
 * How providers say an `eth_getLogs` range or its result is too large (geth, Erigon, Alchemy, Infura, QuickNode,
 * Ankr, BlastAPI wordings). A rate limit is not one: it is waited out, not narrowed.
 */
const RANGE_LIMIT =
  /block range|range (is )?too (large|wide|big)|max(imum)? (block )?range|blocks? range|exceed(s|ed)? (the )?(max|maximum|limit)|limited to (a )?\d+|more than \d+ (results|logs|blocks)|too many (results|logs|blocks)|query returned more than|response (size|is too)|log response size/i;

/** How nodes say they no longer hold a block's state (geth, erigon, reth, Nethermind; hosted providers' wording). */
const PRUNED_STATE = /missing trie node|state (is )?not available|historical state|pruned|state .*not found|required historical state/i;
/** How an endpoint behind the others says it does not know the block yet. */
const UNKNOWN_BLOCK = /header not found|unknown block|block not found|cannot query unfinalized|block number .*(greater|higher|beyond)/i;

export class WorkerChain {
  readonly client: ChainPublicClient;
  readonly chainId: number;
  readonly registryAddress: Address;
  readonly treasuryAddress: Address;
  readonly registryFromBlock: bigint | undefined;
  readonly health: ChainHealth;
  /** Each endpoint's breaker: the order reads ask them in (lib/chain/endpoint-breaker.ts). */
  readonly breaker: EndpointBreaker;
  /**
   * One client per endpoint, without failover (and without the breaker's leave-aside): for broadcasts (every raw
   * transaction goes to all) and for reads that must come whole from one endpoint with its chain id (fromOneEndpoint).
   */
  private readonly endpointClients: ChainPublicClient[];
  /** The same without batching: the heads survey asks each endpoint its head and chain id as two lone calls. */
  private readonly surveyClients: ChainPublicClient[];
  /**
   * The same endpoints without batching, for the head (`eth_blockNumber`), always asked alone: viem schedules a
   * batch with `setTimeout` even for one call, which about doubles a lone call's CPU (bench/worker-sign.ts).
   */
  private readonly headClient: ChainPublicClient;
  /**
   * Blocks per `eth_getLogs` query: LOG_QUERY_BLOCKS until a range refused as too large is answered narrower, then
   * that width (logsNarrowing), kept for this process's later queries.
   */
  logWindow = LOG_QUERY_BLOCKS;
  /**
   * JSON-RPC calls one batched HTTP request carries at most (RPC_BATCH_SIZE): more are split over several requests.
   * What must be read in one request (receiptsWithNonces) is kept within it by its callers.
   */
  readonly batchSize: number;
  private readonly onLogWindowNarrowed: WorkerChainOptions["onLogWindowNarrowed"];

  constructor(options: WorkerChainOptions) {
    this.onLogWindowNarrowed = options.onLogWindowNarrowed;
    this.batchSize = options.batchSize ?? BATCH_SIZE;
    this.health = options.health ?? new ChainHealth();
    const rpcUrls = rpcUrlList(options.rpcUrl);
    this.breaker = options.endpoints ?? workerEndpoints(rpcUrls);
    // Reads and the best head take only endpoints that answered this chain id (start-up's, or a survey's).
    this.breaker.useChain(options.chainId);
    const fetchFn = createNodeFetch();
    // No retries inside viem: the worker's loop backs off and logs, and a broadcast is retried from the database.
    const clientOptions = {
      chainId: options.chainId,
      timeoutMs: options.timeoutMs ?? ENDPOINT_TIMEOUT_MS,
      batchSize: this.batchSize,
      retryCount: 0,
      // node:http with keep-alive instead of the global fetch: a fraction of the CPU per JSON-RPC request.
      fetchFn,
      maxResponseBodySize: false as const,
    };
    const readOptions = { ...clientOptions, rpcUrl: rpcUrls, endpoints: this.breaker };
    this.client = createChainClients(readOptions).publicClient;
    this.headClient = createChainClients({ ...readOptions, batch: false }).publicClient;
    this.endpointClients = rpcUrls.map((rpcUrl) => createChainClients({ ...clientOptions, rpcUrl }).publicClient);
    this.surveyClients = rpcUrls.map((rpcUrl) => createChainClients({ ...clientOptions, rpcUrl, batch: false }).publicClient);
    this.chainId = options.chainId;
    this.registryAddress = options.registryAddress;
    this.treasuryAddress = options.treasuryAddress;
    this.registryFromBlock = options.registryFromBlock;
  }

  /** Each endpoint of RPC_URL, in order, as its breaker last found it. */
  get endpoints(): readonly EndpointState[] {
    return this.breaker.endpoints;
  }

  /**
   * eth_chainId of an RPC, for start-up (the deployment may not name the chain). Several endpoints are asked at once
   * (askEach): the first in RPC_URL's order that answers tells it, and one silent by then starts its cool-off in
   * `endpoints`, the breakers the worker's reads then share, instead of costing every start-up read its timeout.
   * The chain ids answered are noted there: an endpoint silent now is asked its chain id by the first survey that
   * reaches it, and read only once it has answered this one (surveyHead).
   */
  static async readChainId(rpcUrl: string | readonly string[], options: { timeoutMs?: number; endpoints?: EndpointBreaker } = {}): Promise<number> {
    const rpcUrls = rpcUrlList(rpcUrl);
    const clientOptions = { timeoutMs: options.timeoutMs ?? ENDPOINT_TIMEOUT_MS, retryCount: 0, batch: false };
    if (rpcUrls.length === 1) {
      const client = createChainClients({ rpcUrl: rpcUrls, ...clientOptions }).publicClient;
      const chainId = await reach("eth_chainId", () => client.getChainId());
      options.endpoints?.noteChainId(0, chainId);
      return chainId;
    }
    const breaker = options.endpoints ?? workerEndpoints(rpcUrls);
    const clients = rpcUrls.map((url) => createChainClients({ rpcUrl: url, ...clientOptions }).publicClient);
    const { answers, errors } = await askEach(breaker, clients, (client) => client.getChainId());
    const first = [...answers.keys()].sort((a, b) => a - b)[0];
    // One endpoint of another chain (a mainnet URL beside a testnet's) would answer reads, and its higher head would
    // make the right endpoints look behind and leave it every read: refused at start-up, naming both.
    const other = [...answers].find(([, id]) => first !== undefined && id !== answers.get(first));
    if (first !== undefined && other !== undefined) {
      throw new FatalWorkerError(
        `RPC_URL lists endpoints of different chains: endpoint ${first + 1} serves chain ${answers.get(first)}, endpoint ${other[0] + 1} chain ${other[1]}; every endpoint must serve the same chain`,
      );
    }
    if (first !== undefined) {
      const chainId = answers.get(first)!;
      for (const [index, id] of answers) breaker.noteChainId(index, id);
      breaker.useChain(chainId);
      return chainId;
    }
    // No endpoint answered: an outage when one was not reached (waited out), else the first endpoint's refusal.
    const unreached = errors.find((e) => isUnreachable(e));
    if (unreached !== undefined || errors.length === 0) {
      throw new ChainUnavailableError(`eth_chainId: no RPC endpoint answered (${messageOf(unreached ?? "every endpoint silent")})`, { cause: unreached });
    }
    throw errors[0];
  }

  /** An answer (or an error: only "not reached" counts against it) from one endpoint. */
  private noteEndpoint(index: number, error: unknown): void {
    this.breaker.noteAnswer(index, error);
  }

  private reach<T>(what: string, read: () => Promise<T>): Promise<T> {
    return reach(what, read, this.health);
  }

  async blockNumber(): Promise<bigint> {
    return this.reach("eth_blockNumber", async () => hexToBigInt(await this.headClient.request({ method: "eth_blockNumber" })));
  }

  /**
   * The head and the chain id, from every endpoint (the maintenance check's: once per heartbeat while busy, every 30 s
   * idle): each endpoint on its own, both as lone calls (a pool of nodes answers lone calls and batches from different
   * nodes, and the head is the lone poll's, as before: worker/registry-index.test.ts), and all at once (askEach), so a
   * silent endpoint costs the check SURVEY_GRACE_MS at most. The chain id here keeps the endpoints' states true; the
   * reads it decides carry their own (fromOneEndpoint, broadcast). Each answer is noted in the breakers: an endpoint more than
   * LAGGING_BLOCKS behind the best head seen, at a head the best head had passed LAGGING_MS before, is left aside by
   * reads until it catches up, and one whose cool-off has ended is re-probed. Only an endpoint that answers this
   * chain's id has its head counted and is read; one that answers another chain's is left aside (EndpointBreaker.
   * noteChainId, one error line) until a later survey, which asks it its chain id alone, finds it serving this one
   * again, and the worker goes on with the others. With one endpoint, or none left serving the chain, that is an
   * outage: waited out, no attempt consumed. The head returned is the highest of the endpoints of the chain not behind.
   */
  async surveyHead(): Promise<bigint> {
    const { answers: surveyed, errors } = await askEach(this.breaker, this.surveyClients, async (client, index) => {
      const chainCall = client.request({ method: "eth_chainId" });
      // Of another chain: its chain id alone (whether it serves this one again); else with its head.
      if (this.endpoints[index]!.otherChain) return { chainId: hexToNumber(await chainCall), head: undefined };
      const [chainId, head] = await Promise.all([chainCall, client.request({ method: "eth_blockNumber" })]);
      return { chainId: hexToNumber(chainId), head: hexToBigInt(head) };
    });
    for (const [index, { chainId }] of surveyed) this.breaker.noteChainId(index, chainId);
    const answers = new Map([...surveyed].flatMap(([i, { head }]) => (head !== undefined && this.breaker.servesChain(i) ? [[i, head] as const] : [])));
    this.breaker.noteHeads(answers);
    const current = [...answers].filter(([i]) => !this.endpoints[i]!.behind).map(([, head]) => head);
    if (current.length === 0) {
      const others = [...surveyed].filter(([i]) => !this.breaker.servesChain(i));
      const error = new ChainUnavailableError(
        answers.size === 0 && others.length > 0
          ? `eth_chainId: every RPC endpoint that answered serves another chain than ${this.chainId} (${others.map(([i, { chainId }]) => `endpoint ${i + 1}: chain ${chainId}`).join(", ")})`
          : answers.size === 0
            ? `eth_blockNumber: no RPC endpoint answered (${messageOf(errors[0] ?? "every endpoint silent")})`
            : `eth_blockNumber: every RPC endpoint that answered is more than ${LAGGING_BLOCKS} blocks and ${LAGGING_MS} ms behind block ${this.breaker.bestHead}`,
        { cause: errors[0] },
      );
      this.health.noteUnreachable(error);
      throw error;
    }
    this.health.noteReached();
    return current.reduce((a, b) => (b > a ? b : a));
  }

  /**
   * Latest and pending nonces of each relayer, from one endpoint that answers this chain's id in the same batched
   * request (fromOneEndpoint: they move the relayer's next nonce on); with `settledAt`, also the nonce at that block
   * (CONFIRMATIONS - 1 below the head): every nonce below it is mined deep enough to settle.
   */
  async nonces(relayers: readonly Address[], settledAt?: bigint): Promise<Map<Address, RelayerNonces>> {
    const tags = ["latest", "pending", ...(settledAt === undefined ? [] : [numberToHex(settledAt)])];
    return this.reach("eth_getTransactionCount", async () => {
      const answers = await this.fromOneEndpoint((client) =>
        Promise.all(
          relayers.flatMap((address) => tags.map((tag) => client.request({ method: "eth_getTransactionCount", params: [address, tag as "latest"] }))),
        ),
      );
      if (answers === undefined) throw new NoEndpointOfChainError(`no RPC endpoint of chain ${this.chainId} answered`);
      return new Map(
        relayers.map((address, i) => {
          const [latest, pending, settled] = tags.map((_, t) => Number(BigInt(answers[tags.length * i + t]!)));
          return [address, { latest: latest!, pending: pending!, settled: settled ?? latest! }];
        }),
      );
    });
  }

  /** The fees to offer now: priority fee as the node suggests, max fee with room for 3x the base fee. */
  async marketFees(): Promise<MarketFees> {
    return this.reach("fees", async () => {
      const [block, priority] = await Promise.all([
        this.client.request({ method: "eth_getBlockByNumber", params: ["latest", false] }),
        this.client.request({ method: "eth_maxPriorityFeePerGas" }).catch(() => "0x3b9aca00" as Hex),
      ]);
      const maxPriorityFeePerGas = hexToBigInt(priority);
      const baseFee = block?.baseFeePerGas ? hexToBigInt(block.baseFeePerGas) : 0n;
      if (baseFee === 0n) return { maxFeePerGas: maxPriorityFeePerGas * 2n, maxPriorityFeePerGas, baseFeePerGas: 0n };
      return { maxFeePerGas: baseFee * 3n + maxPriorityFeePerGas, maxPriorityFeePerGas, baseFeePerGas: baseFee };
    });
  }

  /** Receipts of many transactions in one batched request; null for a hash not mined (or unknown). */
  async receipts(hashes: readonly Hash[]): Promise<Map<Hash, MinedReceipt | null>> {
    if (hashes.length === 0) return new Map();
    return this.reach("eth_getTransactionReceipt", async () => {
      const answers = await Promise.all(hashes.map((hash) => this.client.request({ method: "eth_getTransactionReceipt", params: [hash] })));
      return toReceipts(hashes, answers as RpcReceipt[]);
    });
  }

  /**
   * The receipts of `hashes` and each relayer's nonce at `settledAt` (else at the latest block), all from one
   * endpoint in one batched HTTP request: the endpoints in order, the first that answers every call. Undefined when
   * none does. "The nonce is used and none of our hashes has a receipt" must not be pieced together from an endpoint
   * ahead of another: the reads' failover moves each failed call on alone (a call refused inside a batch goes to
   * the next endpoint without the others), and a load-balanced provider can answer two requests from two nodes.
   * Callers keep `hashes` and `relayers` together within `batchSize` calls, so the batch is not split (but a single
   * nonce group with more attempts than a provider's RPC_BATCH_SIZE allows: then it is, settle.ts oneRequestOf).
   */
  async receiptsWithNonces(
    hashes: readonly Hash[],
    relayers: readonly Address[],
    settledAt?: bigint,
  ): Promise<{ receipts: Map<Hash, MinedReceipt | null>; nonces: Map<Address, number> } | undefined> {
    const tag = settledAt === undefined ? "latest" : numberToHex(settledAt);
    const answer = await this.fromOneEndpoint((client) =>
      Promise.all([
        Promise.all(hashes.map((hash) => client.request({ method: "eth_getTransactionReceipt", params: [hash] }))),
        Promise.all(relayers.map((address) => client.request({ method: "eth_getTransactionCount", params: [address, tag as "latest"] }))),
      ]),
    );
    if (answer === undefined) return undefined;
    const [answers, counts] = answer;
    return {
      receipts: toReceipts(hashes, answers as RpcReceipt[]),
      nonces: new Map(relayers.map((address, i) => [address, Number(BigInt(counts[i]!))])),
    };
  }

  /**
   * `read`'s calls and the endpoint's `eth_chainId`, issued together (viem's batching sends them in one HTTP request),
   * of the endpoints in read order: the answer of the first that answers every call and this chain's id. Undefined
   * when none does. For the reads whose nonces decide (a relayer's next nonce moved on, "nonce used and no receipt of
   * ours": dropped): the surveys check each endpoint's chain id only every maintenance check, and an endpoint that
   * changed networks since (a provider's URL moved to another chain, a node restarted on another genesis, the
   * relayer keys in use there too) would have answered another chain's nonces. One that answers another chain id is
   * left aside from then on (EndpointBreaker.noteChainId). The chain id is not asked again of an endpoint that
   * answered it within CHAIN_ID_FRESH_MS (the survey of the maintenance check this read is part of).
   */
  private async fromOneEndpoint<T>(read: (client: ChainPublicClient) => Promise<T>): Promise<T | undefined> {
    for (const e of this.breaker.readOrder()) {
      const client = this.endpointClients[e]!;
      this.breaker.asking(e);
      try {
        const fresh = this.breaker.chainIdFresh(e);
        const [chainId, value] = await Promise.all([fresh ? undefined : client.request({ method: "eth_chainId" }), read(client)]);
        this.noteEndpoint(e, undefined);
        if (chainId !== undefined) this.breaker.noteChainId(e, hexToNumber(chainId));
        if (this.breaker.servesChain(e)) return value;
      } catch (error) {
        // Not every call answered (down, a block behind the asked one, a limit): the next endpoint, whole.
        this.noteEndpoint(e, error);
      }
    }
    return undefined;
  }

  /**
   * Sends stored raw transactions together (one batched request per endpoint, in the given order) to every
   * endpoint, and classifies each transaction's answers (combineBroadcastOutcomes): accepted by any endpoint is
   * accepted. The chain counts as unreachable only when no endpoint was reached. The answers of endpoints cooling
   * off (not reached lately) are waited for only when the others did not accept every transaction: an acceptance is
   * final whatever they say, and a silent one would hold each broadcast for its timeout (its answer is still noted).
   * An endpoint of another chain (EndpointBreaker.noteChainId) is sent nothing: the signatures bind this chain's id
   * (EIP-155), so it could not use them. One whose chain id is not known yet (silent at start-up) is sent them, but
   * its answers do not decide (EndpointBreaker.askable): a node of another chain would refuse them ("invalid chain
   * id for signer"), or find their nonce used, and a refusal outweighs endpoints that did not answer
   * (combineBroadcastOutcomes), or burns an attempt. Each endpoint is asked its chain id in the same batched request:
   * one that answers another chain's (changed networks since the last survey) decides nothing and is left aside.
   */
  async broadcast(raws: readonly Hex[]): Promise<BroadcastOutcome[]> {
    if (raws.length === 0) return [];
    type EndpointOutcomes = { unreachable: unknown; outcomes: BroadcastOutcome[] };
    const answered: (EndpointOutcomes | undefined)[] = this.endpointClients.map(() => undefined);
    const sends = this.endpointClients.map(async (client, e) => {
      if (this.endpoints[e]!.otherChain) return;
      const [chainCall, ...settled] = await Promise.allSettled([
        client.request({ method: "eth_chainId" }),
        ...raws.map((raw) => client.request({ method: "eth_sendRawTransaction", params: [raw] })),
      ]);
      if (chainCall.status === "fulfilled") this.breaker.noteChainId(e, hexToNumber(chainCall.value));
      const unreachable = settled.find((s) => s.status === "rejected" && isUnreachable(s.reason));
      this.noteEndpoint(e, unreachable?.status === "rejected" ? unreachable.reason : undefined);
      answered[e] = {
        unreachable: unreachable?.status === "rejected" ? (unreachable.reason as unknown) : undefined,
        outcomes: settled.map((s): BroadcastOutcome => (s.status === "fulfilled" ? { kind: "accepted" } : classifyBroadcastError(s.reason))),
      };
    });
    const coolingOff = new Set(this.endpoints.flatMap((endpoint, e) => (endpoint.failures > 0 ? [e] : [])));
    const first = sends.filter((_, e) => !coolingOff.has(e));
    await Promise.all(first.length > 0 ? first : sends);
    const decisive = () => {
      const decides = this.breaker.askable();
      return answered.filter((p, e): p is EndpointOutcomes => p !== undefined && decides[e] === true);
    };
    const allAccepted = raws.every((_, i) => decisive().some((p) => p.outcomes[i]!.kind === "accepted"));
    if (!allAccepted) await Promise.all(sends);
    const perEndpoint = decisive();
    // No endpoint of this chain to decide (each answers another chain id now): waited out as an outage.
    if (perEndpoint.length === 0) {
      const error = new ChainUnavailableError("eth_sendRawTransaction: no RPC endpoint known to serve this chain answered");
      this.health.noteUnreachable(error);
      return raws.map(() => ({ kind: "unavailable", message: error.message }));
    }
    const outcomes = raws.map((_, i) => combineBroadcastOutcomes(perEndpoint.map((p) => p.outcomes[i]!)));
    if (perEndpoint.every((p) => p.unreachable !== undefined)) {
      this.health.noteUnreachable(new ChainUnavailableError(`eth_sendRawTransaction: ${messageOf(perEndpoint[0]!.unreachable)}`));
    } else this.health.noteReached();
    return outcomes;
  }

  /**
   * The registry's `WalletSponsored` events in [fromBlock, toBlock] (worker/registry-index.ts), and `through`: the
   * last block the answer is known to cover (logsOfOneEndpoint); undefined when no endpoint knows `fromBlock` yet.
   */
  async walletsSponsored(fromBlock: bigint, toBlock: bigint): Promise<{ wallets: { wallet: Address; blockNumber: bigint }[]; through: bigint } | undefined> {
    const topics = encodeEventTopics({ abi: registryAbi, eventName: "WalletSponsored" });
    return this.reach("eth_getLogs", async () => {
      const answer = await this.logsNarrowing({ address: this.registryAddress, topics }, fromBlock, toBlock, "start");
      if (answer === undefined) return undefined;
      const { logs, through } = answer;
      const wallets = parseEventLogs({ abi: registryAbi, eventName: "WalletSponsored", logs }).flatMap((log) =>
        log.blockNumber !== null ? [{ wallet: log.args.wallet.toLowerCase() as Address, blockNumber: log.blockNumber }] : [],
      );
      return { wallets, through };
    });
  }

  /**
   * logsOfOneEndpoint over [fromBlock, toBlock], or over part of it when every endpoint refuses the range as too
   * large (LogsRefusedError with `rangeLimit`: a provider's block-range or result limit, RANGE_LIMIT). Each such
   * refusal of a range wider than MIN_LOG_QUERY_BLOCKS halves it, keeping its first blocks (`keep: "start"`, a scan
   * forward: `through` then says where the answer ends) or its last (`"end"`, a scan backward: `fromBlock` of the
   * answer says where it starts); the width answered becomes logWindow for later queries. Any other refusal, and one
   * of MIN_LOG_QUERY_BLOCKS blocks, is thrown (LogsRefusedError).
   */
  private async logsNarrowing(
    filter: { address: Address; topics: (Hex | Hex[] | null)[] },
    fromBlock: bigint,
    toBlock: bigint,
    keep: "start" | "end",
  ): Promise<{ logs: Log[]; fromBlock: bigint; through: bigint } | undefined> {
    let from = fromBlock;
    let to = toBlock;
    let firstRefusal: { error: LogsRefusedError; width: bigint } | undefined;
    for (;;) {
      try {
        const answer = await this.logsOfOneEndpoint(filter, from, to);
        // Kept once a narrower range was answered (a refusal that narrowing does not cure changes nothing).
        const width = to - from + 1n;
        if (firstRefusal && width < this.logWindow) {
          this.onLogWindowNarrowed?.({ blocks: width, refusedBlocks: firstRefusal.width, error: firstRefusal.error.message });
          this.logWindow = width;
        }
        return answer && { ...answer, fromBlock: from };
      } catch (error) {
        // Only a range or result limit is narrowed; any other refusal (a method not served, a rate limit, a gateway's
        // 401) is thrown as it is: the caller waits it out (settle.ts), it does not narrow the window for good.
        if (!(error instanceof LogsRefusedError) || !error.rangeLimit) throw error;
        const width = to - from + 1n;
        if (width <= MIN_LOG_QUERY_BLOCKS) throw error;
        firstRefusal ??= { error, width };
        const narrower = width / 2n > MIN_LOG_QUERY_BLOCKS ? width / 2n : MIN_LOG_QUERY_BLOCKS;
        if (keep === "start") to = from + narrower - 1n;
        else from = to - narrower + 1n;
      }
    }
  }

  /**
   * `eth_getLogs` over [fromBlock, toBlock] from one endpoint, with `through`: the last block the answer is known to
   * cover. Each endpoint is asked, in the breaker's read order, for its head (`eth_blockNumber`) and the logs
   * together, in one batched HTTP request, the head first: geth runs a batch's calls one after another in order
   * (rpc/handler.go, handleBatch), so its logs were read at a head at least that high. A node that runs a batch's
   * calls concurrently (Erigon's --rpc.batch.concurrency) can answer the logs at a lower head than the one it
   * reports while a block is being imported: a narrow race this does not close. The first endpoint whose head
   * reaches `toBlock` answers for the whole range. An endpoint behind it does not say so: anvil and older geth answer
   * the blocks they have (a range past the head is cut at it, without an error), a pool of nodes answers from
   * whichever is asked, and the head the range ends at may be another endpoint's. When none reaches `toBlock`, the
   * answer of the one that got furthest covers up to its head (`through` below `toBlock`, logs above it dropped); when
   * none knows even `fromBlock`, undefined: nothing is covered yet. A failed call (not reached, or refused: current
   * geth answers a range past its head with an error) moves on to the next endpoint; when every endpoint failed, the
   * first failure is thrown: one not reached first (a chain outage), then LogsRefusedError when an endpoint that has
   * the range refused the logs call (`rangeLimit` when one said the range or the result is too large), else the head
   * call's error. An endpoint is asked its chain id with them (fromOneEndpoint's rule) and passed when it does not
   * answer this chain's: its logs are another network's (NoEndpointOfChainError, counted as not reached).
   */
  private async logsOfOneEndpoint(
    filter: { address: Address; topics: (Hex | Hex[] | null)[] },
    fromBlock: bigint,
    toBlock: bigint,
  ): Promise<{ logs: Log[]; through: bigint } | undefined> {
    const params = { ...filter, fromBlock: numberToHex(fromBlock), toBlock: numberToHex(toBlock) };
    let best: { logs: RpcLog[]; through: bigint } | undefined;
    let behind = false;
    const errors: unknown[] = [];
    // The logs call answered with an error by an endpoint whose head covers the range: the node said no.
    const refusals: unknown[] = [];
    for (const e of this.breaker.readOrder()) {
      const client = this.endpointClients[e]!;
      this.breaker.asking(e);
      // Issued together, the head first: viem's batching sends them in one HTTP request, in this order. Without
      // batches (RPC_BATCH_SIZE=1) they would be two requests at once, which a pool of nodes can answer from two:
      // the logs are then asked once the head has answered, so they are read at a head at least that high. The
      // chain id comes last (in the same request when RPC_BATCH_SIZE allows three calls), unless this endpoint
      // answered it within CHAIN_ID_FRESH_MS: an endpoint that moved to another network since the last maintenance
      // check would say a payment's event is missing, or a wallet was sponsored, for what that network holds.
      const headCall = client.request({ method: "eth_blockNumber" });
      const askLogs = () => client.request({ method: "eth_getLogs", params: [params] });
      const logsCall = this.batchSize >= 2 ? askLogs() : headCall.then(askLogs, askLogs);
      const chainCall = this.breaker.chainIdFresh(e) ? undefined : client.request({ method: "eth_chainId" });
      const [head, logs, chainId] = await Promise.allSettled([headCall, logsCall, chainCall]);
      if (chainId.status === "fulfilled" && chainId.value !== undefined) this.breaker.noteChainId(e, hexToNumber(chainId.value));
      if (head.status === "rejected") {
        this.noteEndpoint(e, head.reason);
        errors.push(head.reason);
        continue;
      }
      this.noteEndpoint(e, logs.status === "rejected" ? logs.reason : chainId.status === "rejected" ? chainId.reason : undefined);
      // Its chain id unanswered, or another chain's: its logs say nothing about this chain (counted as not reached).
      if (chainId.status === "rejected" || !this.breaker.servesChain(e)) {
        errors.push(
          chainId.status === "rejected"
            ? chainId.reason
            : new NoEndpointOfChainError(`eth_getLogs: endpoint ${e + 1} serves chain ${this.endpoints[e]!.chainId}, not ${this.chainId}`),
        );
        continue;
      }
      const known = hexToBigInt(head.value);
      if (logs.status === "rejected") {
        // Behind the range's end, a refusal is the node's way of saying so (current geth): not an error of ours.
        if (known < toBlock) behind = true;
        else (isUnreachable(logs.reason) ? errors : refusals).push(logs.reason);
        continue;
      }
      if (known >= toBlock) {
        best = { logs: logs.value, through: toBlock };
        break;
      }
      behind = true;
      if (known >= fromBlock && (best === undefined || known > best.through)) best = { logs: logs.value, through: known };
    }
    if (best === undefined) {
      if (behind) return undefined;
      const unreachable = errors.find((error) => isUnreachable(error));
      if (unreachable !== undefined) throw unreachable;
      if (refusals.length > 0) {
        const message = `eth_getLogs over ${toBlock - fromBlock + 1n} blocks refused by every RPC endpoint: ${messageOf(refusals[0])}`;
        throw new LogsRefusedError(message, { cause: refusals[0], rangeLimit: refusals.some((r) => RANGE_LIMIT.test(messageOf(r))) });
      }
      throw errors[0] ?? new ChainUnavailableError("eth_getLogs: no RPC endpoint to ask");
    }
    const through = best.through;
    return { logs: best.logs.map((log) => formatLog(log)).filter((log) => log.blockNumber !== null && log.blockNumber <= through), through };
  }

  /** The registry the treasury writes (its immutable `registry()`), lowercase. */
  async treasuryRegistry(): Promise<Address> {
    return this.reach(
      "treasury registry",
      async () => (await this.client.readContract({ address: this.treasuryAddress, abi: treasuryAbi, functionName: "registry" })).toLowerCase() as Address,
    );
  }

  /** Which of these relayers the treasury authorises (`isRelayer`, one batched request), lowercase. */
  async authorisedRelayers(relayers: readonly Address[]): Promise<Set<Address>> {
    if (relayers.length === 0) return new Set();
    return this.reach("isRelayer", async () => {
      const answers = await Promise.all(relayers.map((account) => readIsRelayer(this.client, this.treasuryAddress, account)));
      return new Set(relayers.filter((_, i) => answers[i]).map((r) => r.toLowerCase() as Address));
    });
  }

  async treasuryState(): Promise<TreasuryState> {
    return this.reach("treasury state", () => readTreasuryState(this.client, this.treasuryAddress));
  }

  /**
   * The same, read beside the stages (the alert evaluation's refresh while nothing is relayed): not noted in
   * `health`, whose last answer is the clock of the stage deadline (worker/loop.ts). A read from outside the stages
   * that noted it would keep a stuck stage from ever reaching its deadline.
   */
  async treasuryStateAside(): Promise<TreasuryState> {
    return reach("treasury state", () => readTreasuryState(this.client, this.treasuryAddress));
  }

  async balances(addresses: readonly Address[]): Promise<Map<Address, bigint>> {
    return this.reach("balances", () => this.readBalances(addresses));
  }

  /** The same, read beside the stages (the alert evaluation), not noted in `health`: see treasuryStateAside. */
  async balancesAside(addresses: readonly Address[]): Promise<Map<Address, bigint>> {
    return reach("balances", () => this.readBalances(addresses));
  }

  /**
   * From one endpoint that answers this chain's id in the same batched request (fromOneEndpoint): a relayer's balance
   * on another network would decide whether a refused broadcast burns an attempt (worker/stages/broadcast.ts), or
   * raise and clear the operator's low-balance alerts.
   */
  private async readBalances(addresses: readonly Address[]): Promise<Map<Address, bigint>> {
    const values = await this.fromOneEndpoint((client) => Promise.all(addresses.map((address) => client.getBalance({ address }))));
    if (values === undefined) throw new NoEndpointOfChainError(`no RPC endpoint that serves chain ${this.chainId} answered`);
    return new Map(addresses.map((a, i) => [a, values[i]!]));
  }

  /**
   * Why `sponsor(wallet, requestIdHash(requestId))` from `relayer` reverted in block `atBlock` (receipts carry no
   * revert data): the call replayed against the state after that block, so an unpause or a refill mined in a later
   * block does not hide a revert of the service's own making (one later in the same block still does). Against the
   * latest state only when the node no longer holds that block's (PRUNED_STATE). "NotRelayer(0x...)",
   * "AlreadySponsored(0x...)", ... or a generic text when the node's answer tells nothing. Undefined when it gave no
   * answer: no endpoint that serves this chain (it asks its id in the same batched request, fromOneEndpoint) was
   * reached and knew the block; one behind that does not know it yet is passed for the next. The caller then waits
   * (it is not noted in the chain's health: one read the node refuses must not stop the rest of the confirm stage).
   */
  async explainSponsorRevert(relayer: Address, wallet: Address, requestId: string, atBlock: bigint): Promise<SponsorRevert | undefined> {
    const replay = (client: ChainPublicClient, blockNumber: bigint | undefined) =>
      client
        .simulateContract({
          address: this.treasuryAddress,
          abi: treasuryAbi,
          functionName: "sponsor",
          args: [wallet, requestIdHash(requestId)],
          account: relayer,
          // The relay's own gas limit: a wallet whose receive needs more (TransferFailed in the block) would succeed
          // with the node's default, and its revert would read as one a retry could cure.
          gas: SPONSOR_GAS_LIMIT,
          ...(blockNumber === undefined ? {} : { blockNumber }),
        })
        .then(
          () => undefined,
          (error: unknown) => error ?? new Error("eth_call failed"),
        );
    // From one endpoint that answers this chain's id with the replay: a revert reason read from a network the
    // endpoint moved to since the last maintenance check (an AlreadySponsored there) would settle the request on it.
    return this.fromOneEndpoint(async (client) => {
      for (const blockNumber of [atBlock, undefined]) {
        const error = await replay(client, blockNumber);
        if (error === undefined) {
          return {
            text: `reverted on-chain (the same call succeeds against ${blockNumber === undefined ? "the latest state" : `the state after block ${blockNumber}`})`,
          };
        }
        const revert = describeRevert(error);
        if (revert) return revert;
        // Not answered here (not reached, or a node behind that does not know the block yet): the next endpoint.
        if (isUnreachable(error)) throw error;
        const message = messageOf(error);
        if (blockNumber !== undefined && UNKNOWN_BLOCK.test(message)) throw error;
        // The node no longer holds that block's state: replayed against its latest (a second request, same endpoint).
        if (blockNumber !== undefined && PRUNED_STATE.test(message)) continue;
        return { text: `reverted on-chain (reason not available: ${message.slice(0, 200)})` };
      }
      return { text: "reverted on-chain (reason not available)" };
    });
  }

  /**
   * Review's reads (worker/stages/review.ts): the registry's `isSponsored` of `wallets` (one batched `areSponsored`
   * call) and, with `dryRun`, the payments' dry runs (simulateSponsorships), issued together, so they travel in one
   * batched HTTP request, from one endpoint that answers this chain's id in the same request (fromOneEndpoint). They
   * reject requests (`already_sponsored`, `payment_refused`): through the failover, an endpoint that moved to another
   * network since the last maintenance check (every 2 s busy, 30 s idle) answered that network's registry and
   * wallets, and a request could be rejected for what another chain holds. A ChainUnavailableError when no endpoint
   * of this chain answered every call (the requests stay pending).
   */
  async reviewReads(
    wallets: readonly Address[],
    dryRun?: { relayer: Address; requests: readonly { id: string; wallet: Address }[]; gas: bigint },
  ): Promise<{ sponsored: Map<string, boolean>; reverts: Map<string, SponsorRevert | null> }> {
    return this.reach("review reads", async () => {
      const answer = await this.fromOneEndpoint((client) =>
        Promise.all([
          readAreSponsored(client, this.registryAddress, wallets),
          dryRun ? this.dryRuns(client, dryRun.relayer, dryRun.requests, dryRun.gas) : new Map<string, SponsorRevert | null>(),
        ]),
      );
      if (answer === undefined) throw new NoEndpointOfChainError(`areSponsored and dry runs: no RPC endpoint that serves chain ${this.chainId} answered them`);
      const [sponsored, reverts] = answer;
      return { sponsored, reverts };
    });
  }

  /**
   * Review's dry run (decisions.md, "Wallets that cannot be paid"): `sponsor` of each request as `eth_call` from
   * `relayer` with the relay's own gas limit, issued together (one JSON-RPC batch), from one endpoint that answers
   * this chain's id in the same request (as reviewReads). Per request id: `null` when the payment would go through,
   * else the revert (its custom error's name when the treasury gave one). A node that cannot be reached is a
   * ChainUnavailableError (the requests stay pending).
   */
  async simulateSponsorships(relayer: Address, requests: readonly { id: string; wallet: Address }[], gas: bigint): Promise<Map<string, SponsorRevert | null>> {
    if (requests.length === 0) return new Map();
    return this.reach("eth_call sponsor", async () => {
      const answer = await this.fromOneEndpoint((client) => this.dryRuns(client, relayer, requests, gas));
      if (answer === undefined) throw new NoEndpointOfChainError(`eth_call sponsor: no RPC endpoint that serves chain ${this.chainId} answered`);
      return answer;
    });
  }

  /** The dry runs on one endpoint's client; an answer that is no revert (not reached, refused) fails them all. */
  private async dryRuns(
    client: ChainPublicClient,
    relayer: Address,
    requests: readonly { id: string; wallet: Address }[],
    gas: bigint,
  ): Promise<Map<string, SponsorRevert | null>> {
    const settled = await Promise.allSettled(
      requests.map((r) =>
        client.simulateContract({
          address: this.treasuryAddress,
          abi: treasuryAbi,
          functionName: "sponsor",
          args: [r.wallet, requestIdHash(r.id)],
          account: relayer,
          gas,
        }),
      ),
    );
    const answers = new Map<string, SponsorRevert | null>();
    for (const [i, s] of settled.entries()) {
      if (s.status === "fulfilled") answers.set(requests[i]!.id, null);
      else {
        const revert = describeRevert(s.reason);
        if (!revert) throw s.reason;
        answers.set(requests[i]!.id, revert);
      }
    }
    return answers;
  }

  /**
   * The Sponsored events of the given requests among recent blocks, by request id: the chain's own record of
   * which transaction paid a request, used when receipts cannot settle a nonce. The events carry only the hash
   * of each id (`requestIdHash`), so they are asked for by those hashes and mapped back to the ids we know.
   *
   * The treasury's `Sponsored` events of these request ids over the last `lookbackBlocks`, asked newest first in
   * windows of logWindow blocks (hosted RPCs refuse wider `eth_getLogs` ranges; a window refused as too large is
   * halved, logsNarrowing; any other refusal, or one of the narrowest, is LogsRefusedError), until every id is found. With
   * `throughBlock`, the search starts there (blocks above it are not confirmed deep enough), else at the head.
   * Each window comes whole from one endpoint that knows its last block (logsOfOneEndpoint): "not found" is the
   * answer of a node that had every block searched. While no endpoint has reached a window's end, the answer is
   * undefined ("not yet") and the caller leaves what it was deciding to a later pass: read from an endpoint a block
   * behind (the reads' failover, a pool of nodes), the event of a payment that was made looked missing, and its nonce
   * was taken as used by a transaction this service did not send (settleDropped). Not an outage: every endpoint
   * answered, and noting one would stop the relay timeout's clock (ChainHealth).
   */
  async findSponsoredEvents(
    requestIds: readonly string[],
    options: { lookbackBlocks?: bigint; throughBlock?: bigint } = {},
  ): Promise<Map<string, { transactionHash: Hash; blockNumber: bigint }> | undefined> {
    const lookbackBlocks = options.lookbackBlocks ?? 10_000n;
    const found = new Map<string, { transactionHash: Hash; blockNumber: bigint }>();
    if (requestIds.length === 0) return found;
    const byTopic = new Map(requestIds.map((id) => [requestIdHash(id), id]));
    return this.reach("eth_getLogs", async () => {
      const latest = options.throughBlock ?? (await this.blockNumber());
      const oldest = latest > lookbackBlocks ? latest - lookbackBlocks : 0n;
      for (let to = latest; to >= oldest && found.size < requestIds.length;) {
        const from = to - this.logWindow + 1n > oldest ? to - this.logWindow + 1n : oldest;
        const missing = [...byTopic].filter(([, id]) => !found.has(id)).map(([topic]) => topic as Hex);
        const topics = encodeEventTopics({ abi: treasuryAbi, eventName: "Sponsored", args: { requestIdHash: missing } });
        const answer = await this.logsNarrowing({ address: this.treasuryAddress, topics }, from, to, "end");
        if (answer === undefined || answer.through < to) return undefined;
        to = answer.fromBlock - 1n;
        for (const log of parseEventLogs({ abi: treasuryAbi, eventName: "Sponsored", logs: answer.logs })) {
          const hash = log.args.requestIdHash;
          if (!hash || !log.transactionHash || log.blockNumber === null) continue;
          const uuid = byTopic.get(hash.toLowerCase() as Hex);
          if (uuid && !found.has(uuid)) found.set(uuid, { transactionHash: log.transactionHash, blockNumber: log.blockNumber });
        }
      }
      return found;
    });
  }
}
