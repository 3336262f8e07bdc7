import { createChainClients, type ChainPublicClient } from "@/lib/chain/clients";
import { HeadTimeline } from "@/lib/chain/endpoint-breaker";
import { resolveDeployment } from "@/lib/chain/deployment";
import { readTreasuryState } from "@/lib/chain/treasury";
import type { Database } from "@/db/client";
import { readHealthProbe } from "@/db/queries/health";
import { databaseFailureCode } from "@/db/unavailable";
import type { Config } from "@/lib/config";
import { createLogger } from "@/lib/log";
import type { HealthCheck, HealthCheckCode, HealthResponse } from "@/lib/sponsorship/schemas";
import { withTimeout } from "@/lib/with-timeout";

/**
 * GET /health (decisions.md, "Reads"): 200 `ok` or `degraded` while the database answers, 503 `unavailable` when
 * it does not. `checks` reports the database, the chain (each RPC_URL endpoint: ok, down, behind the others by more
 * than LAGGING_BLOCKS and LAGGING_MS, or of another chain), the worker's heartbeat, the treasury's balance, the administrator's pause (`sponsorships`: degraded with the reason while paused) and the fees
 * against MAX_FEE_PER_GAS_GWEI (`fees`: degraded with `fees_above_ceiling` while the base fee is above it, when the
 * worker signs nothing).
 *
 * /health is the floor of the benchmarks, so it stays cheap: one database round trip (which also reads the newest
 * heartbeat), and the chain part (latest block of each endpoint, treasury state) is cached for CHAIN_CACHE_MS and shared by
 * concurrent callers.
 *
 * A failing check says what failed with a short `code` and a fixed sentence, never the error's own text (issue 11:
 * it named internal hosts and "password authentication failed for user ..."); the log keeps the full error.
 */

const logger = createLogger({ component: "health" });

export const CHAIN_CACHE_MS = 2_000;
const DATABASE_TIMEOUT_MS = 2_000;
const CHAIN_TIMEOUT_MS = 2_000;
/** A worker is alive when its newest heartbeat is at most this old: 3 poll intervals, never under 15 s. */
export const workerStaleAfterMs = (config: Config) => Math.max(3 * config.workerIntervalMs, 15_000);

type ChainChecks = { chain: HealthCheck; treasury: HealthCheck; fees: HealthCheck };
type EndpointState = NonNullable<HealthCheck["endpoints"]>[number];

let clients: { key: string; clients: ChainPublicClient[] } | undefined;
let chainCache: { key: string; expiresAt: number; value: Promise<ChainChecks> } | undefined;
/** The best head /health's reads have seen over time, per set of endpoints: how long ago it passed a head. */
let timeline: { key: string; heads: HeadTimeline } | undefined;
/** The chain id each set of RPC endpoints answered, once: a chain's id never changes, so an outage need not hide it. */
const answeredChainIds = new Map<string, number>();

/**
 * The chain's id without asking the chain: CHAIN_ID, else the deployment record's, else the one `config`'s RPC
 * endpoints answered in this process (a chain check read it); undefined when none of these tells it.
 */
export function knownChainId(config: Config): number | undefined {
  if (config.chainId !== undefined) return config.chainId;
  try {
    const recorded = resolveDeployment(config)?.chainId;
    if (recorded !== undefined) return recorded;
  } catch {
    // An unreadable deployment record: the RPC's earlier answer still knows it.
  }
  return answeredChainIds.get(config.rpcUrls.join(","));
}

/** One client per RPC_URL endpoint: each is asked on its own, so /health shows every endpoint's state. */
function endpointClients(rpcUrls: readonly string[], batchSize: number): ChainPublicClient[] {
  const key = `${rpcUrls.join(",")}|${batchSize}`;
  if (clients?.key !== key) {
    clients = { key, clients: rpcUrls.map((rpcUrl) => createChainClients({ rpcUrl, timeoutMs: CHAIN_TIMEOUT_MS, retryCount: 0, batchSize }).publicClient) };
  }
  return clients.clients;
}

/** The fixed sentence of each code: what /health may say about a failure. */
const DETAILS: Record<HealthCheckCode, string> = {
  unreachable: "cannot be reached",
  timeout: "did not answer in time",
  auth_failed: "refused the service's credentials",
  starting_up: "is starting up or shutting down",
  too_many_connections: "refuses more connections",
  rpc_error: "answered with an error",
  error: "failed",
  chain_down: "unknown while the chain cannot be reached",
  database_down: "unknown while the database is down",
  no_heartbeat: "no worker has reported",
  heartbeat_stale: "the newest worker heartbeat is stale",
  relayers_without_gas: "relayers without gas money: their relays wait until they are funded",
  relayers_not_authorised: "no relayer of a worker is authorised by the treasury: its requests wait approved until the owner authorises one",
  underfunded: "the treasury holds less than one sponsorship",
  treasury_paused: "the treasury is paused",
  no_deployment: "no TREASURY_ADDRESS and no local deployment",
  fees_above_ceiling: "the base fee is above MAX_FEE_PER_GAS_GWEI: new relays wait (requests stay approved) and stuck ones are not replaced until it falls",
  endpoints_down: "some RPC endpoints do not answer (the others serve)",
  endpoints_other_chain: "some RPC endpoints serve another chain (the worker never reads them: fix RPC_URL)",
  endpoints_behind: "some RPC endpoints are more than 3 blocks and 3 s behind the others (the worker reads from the others until they catch up)",
};

const failed = (status: HealthCheck["status"], code: HealthCheckCode, subject?: string): HealthCheck => ({
  status,
  code,
  detail: subject ? `${subject} ${DETAILS[code]}` : DETAILS[code],
});

/** Thrown by `withTimeout`: a check that took too long. */
class HealthTimeoutError extends Error {
  override name = "HealthTimeoutError";
  readonly code = "TIMEOUT";
}

/** A short code for a failed chain read (viem's errors: TimeoutError, HttpRequestError with or without a status). */
function chainFailureCode(error: unknown): HealthCheckCode {
  for (let e: unknown = error, depth = 0; e && typeof e === "object" && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const name = (e as { name?: unknown }).name;
    if (name === "TimeoutError" || name === "HealthTimeoutError") return "timeout";
    if (name === "HttpRequestError") {
      const status = (e as { status?: unknown }).status;
      if (status === 401 || status === 403) return "auth_failed";
      return typeof status === "number" ? "rpc_error" : "unreachable";
    }
  }
  return "rpc_error";
}

type EndpointRead = { state: EndpointState; chainId?: number; blockNumber?: bigint; baseFeePerGas?: bigint | null; client: ChainPublicClient };

async function readEndpoint(index: number, client: ChainPublicClient): Promise<EndpointRead> {
  const started = performance.now();
  try {
    // Sent together: one batched HTTP request per endpoint.
    const [chainId, block] = await Promise.all([client.getChainId(), client.getBlock({ blockTag: "latest" })]);
    const latencyMs = Math.round(performance.now() - started);
    return {
      state: { index, status: "ok", blockNumber: block.number.toString(), latencyMs },
      chainId,
      blockNumber: block.number,
      baseFeePerGas: block.baseFeePerGas,
      client,
    };
  } catch (error) {
    const code = chainFailureCode(error);
    logger.warn("health: an RPC endpoint failed", { endpoint: index, code, error });
    return { state: { index, status: "down", code }, client };
  }
}

function feesCheck(config: Config, reachable: EndpointRead | undefined): HealthCheck {
  const ceiling = config.maxFeePerGasWei;
  if (ceiling === undefined) return { status: "not_configured" };
  const ceilingWei = ceiling.toString();
  if (!reachable) return { ...failed("down", "chain_down"), ceilingWei };
  const baseFeeWei = (reachable.baseFeePerGas ?? 0n).toString();
  if ((reachable.baseFeePerGas ?? 0n) > ceiling) return { ...failed("degraded", "fees_above_ceiling"), baseFeeWei, ceilingWei };
  return { status: "ok", baseFeeWei, ceilingWei };
}

async function readChainChecks(config: Config): Promise<ChainChecks> {
  if (config.rpcUrls.length === 0) {
    return { chain: { status: "not_configured" }, treasury: { status: "not_configured" }, fees: { status: "not_configured" } };
  }
  const reads = await Promise.all(endpointClients(config.rpcUrls, config.rpcBatchSize).map((client, i) => readEndpoint(i + 1, client)));
  // decisions.md "Several RPC endpoints": endpoints of one chain. One that answers another chain's id (a mainnet URL
  // beside the testnet's) is named, and neither its head (higher, it made the right ones look behind) nor its reads
  // count: the chain is CHAIN_ID's, the deployment's, or else the first answering endpoint's, as the worker's start-up.
  const expectedChainId = knownChainId(config) ?? reads.find((r) => r.chainId !== undefined)?.chainId;
  for (const r of reads) {
    if (r.state.status === "ok" && r.chainId !== expectedChainId) {
      r.state = { ...r.state, status: "other_chain", chainId: r.chainId! };
      logger.warn("health: an RPC endpoint serves another chain", { endpoint: r.state.index, chainId: r.chainId, expectedChainId });
    }
  }
  // An endpoint that answers with a head more than LAGGING_BLOCKS below the best one's, a head the best one had passed
  // LAGGING_MS before, has stopped following the chain (or lags far behind): its answers are of the past, and the
  // worker leaves it aside by the same rule (lib/chain/endpoint-breaker.ts, docs/worker.md).
  const best = reads.reduce<bigint | undefined>((b, r) => (r.state.status === "ok" && (b === undefined || r.blockNumber! > b) ? r.blockNumber! : b), undefined);
  const key = config.rpcUrls.join(",");
  if (timeline?.key !== key) timeline = { key, heads: new HeadTimeline() };
  const now = performance.now();
  if (best !== undefined) timeline.heads.note(best, now);
  for (const r of reads) {
    if (r.state.status === "ok" && best !== undefined && timeline.heads.isBehind(r.blockNumber!, best, now)) {
      r.state = { ...r.state, status: "behind" };
      logger.warn("health: an RPC endpoint is behind the others", { endpoint: r.state.index, blockNumber: r.blockNumber, bestBlockNumber: best });
    }
  }
  const endpoints = reads.map((r) => r.state);
  // The first endpoint that answers and is not behind: the chain's id, its head and the treasury as they are now.
  const reachable = reads.find((r) => r.state.status === "ok");
  const fees = feesCheck(config, reachable);
  if (!reachable) {
    // Every endpoint that answers serves another chain (CHAIN_ID or the deployment names this one): said so, not
    // "unreachable", which would send an operator to look at the network.
    const code = reads.some((r) => r.state.status === "other_chain") ? "endpoints_other_chain" : (reads[0]!.state.code ?? "unreachable");
    return {
      chain: { ...failed("down", code, "the chain's RPC endpoint"), endpoints },
      treasury: failed("down", "chain_down"),
      fees,
    };
  }
  const down = reads.some((r) => r.state.status === "down");
  const behind = reads.some((r) => r.state.status === "behind");
  const otherChain = reads.some((r) => r.state.status === "other_chain");
  answeredChainIds.set(key, reachable.chainId!);
  const chain: HealthCheck = {
    // A configuration mistake first: it lasts until RPC_URL is fixed.
    ...(otherChain
      ? failed("degraded", "endpoints_other_chain")
      : down
        ? failed("degraded", "endpoints_down")
        : behind
          ? failed("degraded", "endpoints_behind")
          : { status: "ok" as const }),
    chainId: reachable.chainId!,
    blockNumber: reachable.blockNumber!.toString(),
    latencyMs: reachable.state.latencyMs!,
    endpoints,
  };
  const publicClient = reachable.client;
  let treasury: HealthCheck;
  try {
    const deployment = resolveDeployment(config);
    if (!deployment) {
      treasury = failed("not_configured", "no_deployment");
    } else {
      const state = await readTreasuryState(publicClient, deployment.treasuryAddress);
      // The treasury's own amount, which it pays and the worker checks (the same as SPONSOR_AMOUNT_WEI unless the
      // owner changed it on-chain since the deployment).
      const funded = state.balance >= state.amount;
      treasury = {
        status: funded && !state.paused ? "ok" : "degraded",
        balanceWei: state.balance.toString(),
        requiredWei: state.amount.toString(),
        paused: state.paused,
        ...(funded ? {} : { code: "underfunded" as const, detail: DETAILS.underfunded }),
        ...(state.paused ? { code: "treasury_paused" as const, detail: DETAILS.treasury_paused } : {}),
      };
    }
  } catch (error) {
    const code = chainFailureCode(error);
    logger.warn("health: reading the treasury failed", { code, error });
    treasury = failed("down", code, "reading the treasury");
  }
  return { chain, treasury, fees };
}

/** The chain, treasury and fees checks of /health (cached for CHAIN_CACHE_MS): the dashboard shows them too. */
export function readChainHealth(config: Config): Promise<ChainChecks> {
  return chainChecks(config);
}

/** The chain, treasury and fees checks, cached for CHAIN_CACHE_MS and shared by concurrent callers (GET /faucet reads them too). */
export function chainChecks(config: Config): Promise<ChainChecks> {
  const key = `${config.rpcUrls.join(",")}|${config.treasuryAddress ?? ""}|${config.sponsorAmountWei}|${config.maxFeePerGasWei ?? ""}`;
  // A monotonic clock: on the wall clock, a step back (NTP, a restored VM) kept the cached reads for its length.
  const now = performance.now();
  if (!chainCache || chainCache.key !== key || chainCache.expiresAt <= now) {
    chainCache = { key, expiresAt: now + CHAIN_CACHE_MS, value: readChainChecks(config) };
  }
  return chainCache.value;
}

export type HealthReport = { httpStatus: 200 | 503; body: HealthResponse };

export async function checkHealth(deps: { db: Database; config: Config }): Promise<HealthReport> {
  const { config } = deps;
  const uptime = Math.floor(process.uptime());
  const chainPart = chainChecks(config);

  let database: HealthCheck;
  let worker: HealthCheck;
  let sponsorships: HealthCheck;
  try {
    const started = performance.now();
    const probe = await withTimeout(
      readHealthProbe(deps.db, workerStaleAfterMs(config)),
      DATABASE_TIMEOUT_MS,
      () => new HealthTimeoutError(`the database did not answer within ${DATABASE_TIMEOUT_MS} ms`),
    );
    database = { status: "ok", latencyMs: Math.round((performance.now() - started) * 10) / 10 };
    sponsorships = probe.pause
      ? { status: "degraded", paused: true, reason: probe.pause.reason, detail: "sponsorships are paused by the operator" }
      : { status: "ok", paused: false };
    if (probe.lastBeatMs === null || probe.ageMs === null) {
      worker = { ...failed("down", "no_heartbeat"), lastBeatAt: null };
    } else {
      // The database's age of the heartbeat it stored: no clock of this server is compared with it.
      const ageMs = Math.max(0, Math.round(probe.ageMs));
      const alive = ageMs <= workerStaleAfterMs(config);
      const { relayersWithoutGas: withoutGas, relayersNotAuthorised: notAuthorised } = probe;
      const base = { lastBeatAt: new Date(probe.lastBeatMs).toISOString(), ageMs };
      const lists = {
        ...(withoutGas.length > 0 ? { relayersWithoutGas: withoutGas } : {}),
        ...(notAuthorised.length > 0 ? { relayersNotAuthorised: notAuthorised } : {}),
      };
      if (!alive) worker = { ...failed("down", "heartbeat_stale"), ...base };
      // Requests wait on both; a worker with none of its relayers authorised relays nothing at all, so it is named first.
      else if (notAuthorised.length > 0) worker = { ...failed("degraded", "relayers_not_authorised"), ...base, ...lists };
      else if (withoutGas.length > 0) worker = { ...failed("degraded", "relayers_without_gas"), ...base, ...lists };
      else worker = { status: "ok", ...base };
    }
  } catch (error) {
    const code = databaseFailureCode(error);
    logger.warn("health: the database check failed", { code, error });
    const { chain, treasury, fees } = await chainPart;
    return {
      httpStatus: 503,
      body: {
        status: "unavailable",
        uptime,
        checks: { database: failed("down", code, "the database"), chain, treasury, worker: failed("down", "database_down"), fees },
      },
    };
  }

  const { chain, treasury, fees } = await chainPart;
  const healthy = [chain, treasury, worker, sponsorships, fees].every((c) => c.status === "ok" || c.status === "not_configured");
  return { httpStatus: 200, body: { status: healthy ? "ok" : "degraded", uptime, checks: { database, chain, worker, treasury, sponsorships, fees } } };
}
