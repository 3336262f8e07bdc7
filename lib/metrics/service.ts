import type { Address } from "viem";
import { Counter, Gauge, type Registry } from "prom-client";
import type { Database } from "@/db/client";
import { readBudgetUsage, readServiceState } from "@/db/queries/controls";
import {
  countRelayTransactionsByStatus,
  countRequestsByStatus,
  listRelayerNextNonces,
  listWorkerHeartbeatAges,
  measureOldestOpenRequests,
  type ServiceSnapshot,
} from "@/db/queries/metrics";
import { withTimeout } from "@/lib/with-timeout";

/**
 * Series that describe the whole service rather than one process, read from PostgreSQL and the chain when
 * Prometheus scrapes: requests per status, queue age, relays per status, worker heartbeat age, nonce lag per
 * relayer, relayer and treasury balances. Every instance reports the same values: aggregate them with `max`,
 * not `sum`.
 */

/** What the collectors need from the chain; `createViemChainReader` (chain-reader.ts) implements it with viem. */
export type ChainReader = {
  /** Native-token balance in wei. */
  getBalance(address: Address): Promise<bigint>;
  /** Transactions of `address` mined so far (the `latest` nonce). */
  getMinedNonce(address: Address): Promise<number>;
  /** The treasury's amount per sponsorship, in wei. */
  getSponsorAmount(treasury: Address): Promise<bigint>;
};

export type ServiceSources = {
  db: Database;
  chain?: ChainReader;
  treasuryAddress?: Address;
  /** The configured amount, used when the treasury's own `amount()` cannot be read. */
  sponsorAmountWei?: bigint;
  /** SPONSOR_BUDGET_PER_HOUR / _PER_DAY (0: none). */
  budget?: { perHour: number; perDay: number };
  /** TREASURY_LOW_SPONSORSHIPS: exported, so the Prometheus rule and the `treasury.low` webhook share one threshold. */
  treasuryLowSponsorships?: number;
};

export type ServiceMetricsOptions = {
  /** Resolved on each scrape, so a process can register the collectors before its database or chain is up. */
  sources: () => ServiceSources;
  /** Scrapes within this many milliseconds share one snapshot (protects the database from scrape storms). */
  cacheMs?: number;
  /** Each source (database, chain) gets this long before the scrape goes on without it. */
  timeoutMs?: number;
};

type ChainSnapshot = {
  treasuryBalance?: bigint;
  sponsorAmount?: bigint;
  relayers: Map<string, { minedNonce: number; balance: bigint }>;
};

/** The database's part of a scrape: the service-wide reads, and the administrator's pause (service_state). */
type DbSnapshot = ServiceSnapshot & { paused: boolean };
type Snapshot = { db?: DbSnapshot; chain?: ChainSnapshot };

/** The error of a read given up after `ms`. */
const timedOut = (what: string, ms: number) => () => new Error(`${what} did not answer within ${ms} ms`);

/** wei as a float for a gauge (exact below 2^53 wei, within a few ulps above: fine for monitoring). */
const weiToNumber = (wei: bigint) => Number(wei);

export function registerServiceMetrics(registry: Registry, options: ServiceMetricsOptions): { snapshot(): Promise<Snapshot> } {
  const cacheMs = options.cacheMs ?? 1000;
  const timeoutMs = options.timeoutMs ?? 3000;
  const registers = [registry];

  const errors = new Counter({
    name: "sponsorship_metrics_collect_errors_total",
    help: "Scrapes during which a source of the service-wide series (database, chain) failed or timed out",
    labelNames: ["source"] as const,
    registers,
  });

  async function readDb(db: Database): Promise<DbSnapshot> {
    const [requestsByStatus, oldestOpenSeconds, relaysByStatus, heartbeats, relayers, state] = await Promise.all([
      countRequestsByStatus(db),
      measureOldestOpenRequests(db),
      countRelayTransactionsByStatus(db),
      listWorkerHeartbeatAges(db),
      listRelayerNextNonces(db),
      readServiceState(db),
    ]);
    return { requestsByStatus, oldestOpenSeconds, relaysByStatus, heartbeats, relayers, paused: state.paused };
  }

  async function readChain(sources: ServiceSources, relayers: readonly Address[]): Promise<ChainSnapshot | undefined> {
    const { chain, treasuryAddress: treasury, sponsorAmountWei } = sources;
    if (!chain) return undefined;
    const [treasuryBalance, sponsorAmount, perRelayer] = await Promise.all([
      treasury ? chain.getBalance(treasury) : Promise.resolve(undefined),
      treasury ? chain.getSponsorAmount(treasury).catch(() => sponsorAmountWei) : Promise.resolve(sponsorAmountWei),
      Promise.all(
        relayers.map(async (address) => {
          const [minedNonce, balance] = await Promise.all([chain.getMinedNonce(address), chain.getBalance(address)]);
          return [address.toLowerCase(), { minedNonce, balance }] as const;
        }),
      ),
    ]);
    return { treasuryBalance, sponsorAmount, relayers: new Map(perRelayer) };
  }

  // A scrape's gauges share one snapshot: in flight, or settled less than `cacheMs` ago (a monotonic clock: a step
  // back of the wall clock would keep the snapshot for its length).
  let cached: { settledAt?: number; value: Promise<Snapshot> } | undefined;
  async function take(): Promise<Snapshot> {
    const snapshot: Snapshot = {};
    let sources: ServiceSources;
    try {
      sources = options.sources();
    } catch {
      errors.inc({ source: "database" });
      return snapshot;
    }
    try {
      snapshot.db = await withTimeout(readDb(sources.db), timeoutMs, timedOut("database", timeoutMs));
    } catch {
      errors.inc({ source: "database" });
    }
    try {
      snapshot.chain = await withTimeout(readChain(sources, snapshot.db?.relayers.map((r) => r.address) ?? []), timeoutMs, timedOut("chain", timeoutMs));
    } catch {
      errors.inc({ source: "chain" });
    }
    return snapshot;
  }
  function snapshot(): Promise<Snapshot> {
    const fresh = cached && (cached.settledAt === undefined || performance.now() - cached.settledAt < cacheMs);
    if (!fresh) {
      const entry: NonNullable<typeof cached> = {
        value: take().finally(() => {
          entry.settledAt = performance.now();
        }),
      };
      cached = entry;
    }
    return cached!.value;
  }

  new Gauge({
    name: "sponsorship_requests",
    help: "Sponsorship requests in the database, by status",
    labelNames: ["status"] as const,
    registers,
    async collect() {
      this.reset();
      const s = (await snapshot()).db;
      if (s) for (const [status, n] of Object.entries(s.requestsByStatus)) this.set({ status }, n);
    },
  });
  new Gauge({
    name: "sponsorship_paused",
    help: "1 while the administrator has paused new sponsorships (POST /sponsorship/request answers 503 sponsorships_paused), else 0",
    registers,
    async collect() {
      // remove(), not reset(): an unlabelled gauge's reset() sets 0, which would say "not paused" during an outage.
      this.remove();
      const s = (await snapshot()).db;
      if (s) this.set(s.paused ? 1 : 0);
    },
  });
  new Gauge({
    name: "sponsorship_budget_remaining",
    help: "Sponsorship requests the global budget still allows in the rolling window (hour, day); absent for a window without a budget",
    labelNames: ["window"] as const,
    registers,
    async collect() {
      this.reset();
      const { db, budget } = options.sources();
      if (!budget || (budget.perHour <= 0 && budget.perDay <= 0)) return;
      const used = await withTimeout(readBudgetUsage(db), timeoutMs, timedOut("the database", timeoutMs)).catch(() => undefined);
      if (!used) return;
      if (budget.perHour > 0) this.set({ window: "hour" }, Math.max(0, budget.perHour - used.hour));
      if (budget.perDay > 0) this.set({ window: "day" }, Math.max(0, budget.perDay - used.day));
    },
  });
  new Gauge({
    name: "sponsorship_queue_oldest_seconds",
    help: "Age of the oldest request still in each open status (pending, approved, relayed); absent when none",
    labelNames: ["status"] as const,
    registers,
    async collect() {
      this.reset();
      const s = (await snapshot()).db;
      if (s) for (const [status, age] of Object.entries(s.oldestOpenSeconds)) this.set({ status }, age);
    },
  });
  new Gauge({
    name: "sponsorship_relay_transactions",
    help: "Relay transactions in the database, by status",
    labelNames: ["status"] as const,
    registers,
    async collect() {
      this.reset();
      const s = (await snapshot()).db;
      if (s) for (const [status, n] of Object.entries(s.relaysByStatus)) this.set({ status }, n);
    },
  });
  new Gauge({
    name: "sponsorship_worker_heartbeat_age_seconds",
    help: "Seconds since each worker's last heartbeat; a worker silent for over 5 minutes is left out unless its row is the newest",
    labelNames: ["worker"] as const,
    registers,
    async collect() {
      this.reset();
      const s = (await snapshot()).db;
      if (s) for (const h of s.heartbeats) this.set({ worker: h.workerId }, h.ageSeconds);
    },
  });
  new Gauge({
    name: "sponsorship_relayer_nonce_lag",
    help: "Nonces the service has assigned to a relayer account that the chain has not mined yet (next nonce in the database minus the account's mined transaction count)",
    labelNames: ["relayer"] as const,
    registers,
    async collect() {
      this.reset();
      const { db, chain } = await snapshot();
      if (!db || !chain) return;
      for (const r of db.relayers) {
        const onChain = chain.relayers.get(r.address.toLowerCase());
        if (onChain) this.set({ relayer: r.address.toLowerCase() }, r.nextNonce - onChain.minedNonce);
      }
    },
  });
  new Gauge({
    name: "sponsorship_relayer_balance_wei",
    help: "Native-token balance of each relayer account (it pays the gas), in wei",
    labelNames: ["relayer"] as const,
    registers,
    async collect() {
      this.reset();
      const chain = (await snapshot()).chain;
      if (chain) for (const [relayer, r] of chain.relayers) this.set({ relayer }, weiToNumber(r.balance));
    },
  });
  // An unlabeled gauge that is reset reads 0, not absent (prom-client): the chain unreadable, or no treasury known,
  // exported a treasury of 0 and SponsorshipTreasuryEmpty fired for an RPC outage. `remove()` leaves no sample.
  new Gauge({
    name: "sponsorship_treasury_balance_wei",
    help: "Native-token balance of the treasury contract, in wei",
    registers,
    async collect() {
      this.remove();
      const chain = (await snapshot()).chain;
      if (chain?.treasuryBalance !== undefined) this.set(weiToNumber(chain.treasuryBalance));
    },
  });
  new Gauge({
    name: "sponsorship_treasury_sponsorships_left",
    help: "Sponsorships the treasury's balance still covers at its current amount",
    registers,
    async collect() {
      this.remove();
      const chain = (await snapshot()).chain;
      if (chain?.treasuryBalance !== undefined && chain.sponsorAmount && chain.sponsorAmount > 0n) {
        this.set(Number(chain.treasuryBalance / chain.sponsorAmount));
      }
    },
  });

  new Gauge({
    name: "sponsorship_treasury_low_threshold",
    help: "TREASURY_LOW_SPONSORSHIPS: the treasury is low (treasury.low webhook, SponsorshipTreasuryLow) while it covers fewer sponsorships than this",
    registers,
    collect() {
      this.remove();
      let threshold: number | undefined;
      try {
        threshold = options.sources().treasuryLowSponsorships;
      } catch {
        return; // no sources yet (counted by the snapshot's collectors)
      }
      if (threshold !== undefined) this.set(threshold);
    },
  });

  return { snapshot };
}
