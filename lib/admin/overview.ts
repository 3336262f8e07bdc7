import type { PublicClient, Address } from "viem";
import type { Database } from "@/db/client";
import {
  countRequestsByStatus,
  countWallets,
  getCompletionLatency,
  getOutcomeSeries,
  getQueueDepth,
  listRelayerAccounts,
  listWorkerHeartbeats,
  type CompletionLatency,
  type OutcomeBucket,
  type QueueStage,
  type StatusCounts,
} from "@/db/queries/dashboard";
import type { WorkerHeartbeat } from "@/db/schema";
import { readAccountBalances, readTreasuryState } from "@/lib/chain/treasury";
import { createLogger } from "@/lib/log";
import type { HealthCheck } from "@/lib/sponsorship/schemas";
import { withTimeout } from "@/lib/with-timeout";

/**
 * Everything the dashboard's overview shows, gathered on the server: database reads through db/queries, chain
 * reads through lib/chain. A chain that does not answer within a few seconds leaves its panels with an error
 * message instead of holding the whole page.
 */

const logger = createLogger({ component: "dashboard" });

export const OVERVIEW_RANGES = {
  "1h": { label: "Last hour", ms: 3600_000, bucketSeconds: 120 },
  "24h": { label: "Last 24 hours", ms: 24 * 3600_000, bucketSeconds: 3600 },
  "7d": { label: "Last 7 days", ms: 7 * 24 * 3600_000, bucketSeconds: 6 * 3600 },
} as const;
export type OverviewRange = keyof typeof OVERVIEW_RANGES;

export function parseOverviewRange(value: unknown): OverviewRange {
  // Own keys only: `"constructor" in OVERVIEW_RANGES` is true too.
  return typeof value === "string" && Object.hasOwn(OVERVIEW_RANGES, value) ? (value as OverviewRange) : "24h";
}

export type HeartbeatView = WorkerHeartbeat & { ageMs: number; healthy: boolean };

export type TreasuryView =
  | { kind: "ok"; address: Address; balance: bigint; amount: bigint; paused: boolean; covers: bigint }
  | { kind: "unavailable"; address: Address | null; error: string }
  | { kind: "not_configured" };

export type RelayerView = {
  address: Address;
  /** The next nonce the service will assign (relayer_accounts), null before the worker first leased it. */
  nextNonce: number | null;
  inFlight: number;
  leaseOwner: string | null;
  balance: bigint | null;
  /** Transactions mined from the account (nonce at the latest block). */
  chainNonce: number | null;
  /** Including the node's pending pool. */
  pendingNonce: number | null;
};

export type DashboardOverview = {
  generatedAt: Date;
  range: OverviewRange;
  statusCounts: StatusCounts;
  walletCount: number;
  series: { buckets: OutcomeBucket[]; bucketSeconds: number; since: Date; until: Date };
  latency: CompletionLatency;
  queue: QueueStage[];
  heartbeats: HeartbeatView[];
  treasury: TreasuryView;
  relayers: RelayerView[];
  /** Set when the chain could not be read for the relayer balances and nonces. */
  relayersError: string | null;
  /** Each RPC_URL endpoint's state and the fee ceiling check, as /health reports them (absent without a chain). */
  rpcEndpoints?: (NonNullable<HealthCheck["endpoints"]>[number] & { endpoint: string })[];
  fees?: HealthCheck;
};

export type OverviewChain = {
  client: Pick<PublicClient, "getBalance" | "readContract" | "getTransactionCount">;
  treasuryAddress: Address | null;
};

export type OverviewOptions = {
  range?: OverviewRange;
  now?: Date;
  /** The chain to read, or null when none is configured. */
  chain: OverviewChain | null;
  /** A heartbeat older than this is shown as stale. */
  heartbeatStaleMs: number;
  /** How long chain reads may take before their panels give up. */
  chainTimeoutMs?: number;
};

/** The error of a chain read given up after `ms`. */
const chainTimedOut = (ms: number) => () => new Error(`the chain did not answer within ${Math.round(ms / 1000)} s`);

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // viem's messages run over many lines; the first says what happened.
  return message.split("\n")[0]!.slice(0, 200);
}

async function readTreasury(chain: OverviewChain | null, timeoutMs: number): Promise<TreasuryView> {
  if (!chain?.treasuryAddress) return { kind: "not_configured" };
  const address = chain.treasuryAddress;
  try {
    const state = await withTimeout(readTreasuryState(chain.client, address), timeoutMs, chainTimedOut(timeoutMs));
    return { kind: "ok", address, ...state, covers: state.amount > 0n ? state.balance / state.amount : 0n };
  } catch (error) {
    logger.warn("dashboard could not read the treasury", { error });
    return { kind: "unavailable", address, error: describe(error) };
  }
}

/**
 * The relayer accounts the workers registered (`relayer_accounts`), never the configured keys: the web tier holds
 * no private key (`npm start` gives the web server an environment without them), so an intrusion there cannot pay.
 */
async function readRelayers(db: Database, chain: OverviewChain | null, timeoutMs: number): Promise<{ relayers: RelayerView[]; error: string | null }> {
  const accounts = await listRelayerAccounts(db);
  const byAddress = new Map<Address, RelayerView>();
  for (const a of accounts) {
    byAddress.set(a.address as Address, {
      address: a.address as Address,
      nextNonce: a.nextNonce,
      inFlight: a.inFlight,
      leaseOwner: a.leaseOwner,
      balance: null,
      chainNonce: null,
      pendingNonce: null,
    });
  }
  const relayers = [...byAddress.values()].sort((a, b) => a.address.localeCompare(b.address));
  if (!chain || relayers.length === 0) return { relayers, error: chain ? null : "no chain configured" };
  try {
    const addresses = relayers.map((r) => r.address);
    const [balances, latest, pending] = await withTimeout(
      Promise.all([
        readAccountBalances(chain.client, addresses),
        Promise.all(addresses.map((address) => chain.client.getTransactionCount({ address, blockTag: "latest" }))),
        Promise.all(addresses.map((address) => chain.client.getTransactionCount({ address, blockTag: "pending" }))),
      ]),
      timeoutMs,
      chainTimedOut(timeoutMs),
    );
    relayers.forEach((r, i) => {
      r.balance = balances.get(r.address) ?? null;
      r.chainNonce = latest[i] ?? null;
      r.pendingNonce = pending[i] ?? null;
    });
    return { relayers, error: null };
  } catch (error) {
    logger.warn("dashboard could not read relayer accounts", { error });
    return { relayers, error: describe(error) };
  }
}

export async function loadDashboardOverview(db: Database, options: OverviewOptions): Promise<DashboardOverview> {
  const now = options.now ?? new Date();
  const range = options.range ?? "24h";
  const { ms, bucketSeconds } = OVERVIEW_RANGES[range];
  const bucketMs = bucketSeconds * 1000;
  // Whole buckets: the last one ends at the next boundary after now.
  const until = new Date(Math.floor(now.getTime() / bucketMs) * bucketMs + bucketMs);
  const since = new Date(until.getTime() - ms);
  const timeoutMs = options.chainTimeoutMs ?? 3000;

  const [statusCounts, walletCount, buckets, latency, queue, heartbeats, treasury, relayers] = await Promise.all([
    countRequestsByStatus(db),
    countWallets(db),
    getOutcomeSeries(db, { since, until, bucketSeconds }),
    getCompletionLatency(db, new Date(now.getTime() - ms)),
    getQueueDepth(db),
    listWorkerHeartbeats(db),
    readTreasury(options.chain, timeoutMs),
    readRelayers(db, options.chain, timeoutMs),
  ]);

  return {
    generatedAt: now,
    range,
    statusCounts,
    walletCount,
    series: { buckets, bucketSeconds, since, until },
    latency,
    queue,
    // Ages as the database counts them: the web server's wall clock (which may step, or differ) is not compared.
    heartbeats: heartbeats.map((h) => ({ ...h, ageMs: Math.round(h.ageMs), healthy: h.ageMs <= options.heartbeatStaleMs })),
    treasury,
    relayers: relayers.relayers,
    relayersError: relayers.error,
  };
}
