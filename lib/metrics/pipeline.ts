import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** The worker's own events: relay attempts and their outcomes, stage durations, time per worker step. */

export type RelayFailureKind = "reverted" | "dropped" | "timeout" | "rpc_error" | "nonce" | "underfunded" | "other";
const FAILURE_KINDS = new Set<RelayFailureKind>(["reverted", "dropped", "timeout", "rpc_error", "nonce", "underfunded", "other"]);

/** The timestamps of a request row (db/schema.ts sponsorshipRequests); any that are unset are null/undefined. */
export type RequestTimestamps = {
  status: string;
  requestedAt: Date;
  approvedAt?: Date | null;
  rejectedAt?: Date | null;
  relayedAt?: Date | null;
  completedAt?: Date | null;
  failedAt?: Date | null;
};

export type PipelineMetrics = {
  /** One relay transaction signed and recorded for broadcast (attempt 1..MAX_RELAY_ATTEMPTS). */
  recordRelayAttempt(input: { relayer: string; attempt: number }): void;
  /** One relay attempt that failed (reverted, dropped, not mined in time, ...). */
  recordRelayFailure(input: { relayer: string; kind: RelayFailureKind }): void;
  /** One relay attempt mined successfully. */
  recordRelayConfirmed(input: { relayer: string }): void;
  /** A request that reached a terminal status: the time it spent in each stage, from its own timestamps. */
  observeRequestFinished(request: RequestTimestamps): void;
  /** One pass of a worker stage (review, relay, confirm) over a batch. */
  observeWorkerStep(input: { stage: string; seconds: number; items: number }): void;
  /** Fees just read with MAX_FEE_PER_GAS_GWEI set (worker/fee-ceiling.ts). */
  observeFeeCeiling(input: { ceilingWei: bigint; baseFeeWei: bigint; aboveCeiling: boolean }): void;
};

/** Seconds, 50 ms to 10 minutes: a request takes about a block time per stage, and up to minutes when retried. */
export const STAGE_BUCKETS = [0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60, 120, 300, 600];

const seconds = (from: Date | null | undefined, to: Date | null | undefined): number | undefined =>
  from && to ? Math.max(0, (to.getTime() - from.getTime()) / 1000) : undefined;

export function createPipelineMetrics(registry: Registry): PipelineMetrics {
  const registers = [registry];
  const attempts = new Counter({
    name: "sponsorship_relay_attempts_total",
    help: "Relay transactions signed and recorded for broadcast, by relayer account",
    labelNames: ["relayer", "attempt"] as const,
    registers,
  });
  const failures = new Counter({
    name: "sponsorship_relay_failures_total",
    help: "Relay attempts that failed, by relayer account and kind of failure",
    labelNames: ["relayer", "kind"] as const,
    registers,
  });
  const confirmed = new Counter({
    name: "sponsorship_relay_confirmed_total",
    help: "Relay attempts mined successfully, by relayer account",
    labelNames: ["relayer"] as const,
    registers,
  });
  const finished = new Counter({
    name: "sponsorship_requests_finished_total",
    help: "Requests that reached a terminal status in this process, by status",
    labelNames: ["status"] as const,
    registers,
  });
  const stages = new Histogram({
    name: "sponsorship_stage_duration_seconds",
    help:
      "Time a request spent in each stage, from its timestamps: review (requested to approved/rejected), " +
      "queue (approved to relayed), confirm (relayed to completed/failed), total (requested to completed)",
    labelNames: ["stage"] as const,
    buckets: STAGE_BUCKETS,
    registers,
  });
  const steps = new Histogram({
    name: "sponsorship_worker_step_seconds",
    help: "Duration of one pass of a worker stage over its batch",
    labelNames: ["stage"] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const stepItems = new Counter({
    name: "sponsorship_worker_step_items_total",
    help: "Requests or relays handled by worker stage passes",
    labelNames: ["stage"] as const,
    registers,
  });

  const feeCeiling = new Gauge({
    name: "sponsorship_fee_ceiling_wei",
    help: "MAX_FEE_PER_GAS_GWEI in wei (absent when no ceiling is set)",
    registers,
  });
  const baseFee = new Gauge({
    name: "sponsorship_base_fee_wei",
    help: "Base fee per gas of the latest block the worker read its fees from, in wei (only with a fee ceiling)",
    registers,
  });
  const aboveCeiling = new Gauge({
    name: "sponsorship_fees_above_ceiling",
    help: "1 while the network's base fee is above MAX_FEE_PER_GAS_GWEI (new relays wait, stuck ones are not replaced), else 0",
    registers,
  });

  // Absent until the worker has read its fees with a ceiling set: a new unlabeled gauge reads 0 (prom-client), and a
  // ceiling of 0 wei was exported when there was none.
  for (const gauge of [feeCeiling, baseFee, aboveCeiling]) gauge.remove();

  const relayerLabel = (relayer: string) => relayer.toLowerCase();

  return {
    recordRelayAttempt({ relayer, attempt }) {
      attempts.inc({ relayer: relayerLabel(relayer), attempt: String(Math.max(1, Math.min(attempt, 99))) });
    },
    recordRelayFailure({ relayer, kind }) {
      failures.inc({ relayer: relayerLabel(relayer), kind: FAILURE_KINDS.has(kind) ? kind : "other" });
    },
    recordRelayConfirmed({ relayer }) {
      confirmed.inc({ relayer: relayerLabel(relayer) });
    },
    observeRequestFinished(r) {
      if (r.status !== "completed" && r.status !== "rejected" && r.status !== "failed") return;
      finished.inc({ status: r.status });
      const review = seconds(r.requestedAt, r.approvedAt ?? r.rejectedAt);
      const queue = seconds(r.approvedAt, r.relayedAt);
      const confirm = seconds(r.relayedAt, r.completedAt ?? r.failedAt);
      const total = r.status === "completed" ? seconds(r.requestedAt, r.completedAt) : undefined;
      if (review !== undefined) stages.observe({ stage: "review" }, review);
      if (queue !== undefined) stages.observe({ stage: "queue" }, queue);
      if (confirm !== undefined) stages.observe({ stage: "confirm" }, confirm);
      if (total !== undefined) stages.observe({ stage: "total" }, total);
    },
    observeWorkerStep({ stage, seconds: s, items }) {
      steps.observe({ stage }, Math.max(0, s));
      if (items > 0) stepItems.inc({ stage }, items);
    },
    observeFeeCeiling(input) {
      feeCeiling.set(Number(input.ceilingWei));
      baseFee.set(Number(input.baseFeeWei));
      aboveCeiling.set(input.aboveCeiling ? 1 : 0);
    },
  };
}
