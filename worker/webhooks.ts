import { readBudgetExhaustion } from "@/db/queries/controls";
import { endRetiredRelayerAlerts, giveUpRemovedEndpointDeliveries, pruneWebhookEvents, reportAlert, syncWebhookEndpoints } from "@/db/queries/webhooks";
import type { Config } from "@/lib/config";
import { WebhookDispatcher, type DispatcherSettings } from "@/lib/webhooks/dispatcher";
import type { AlertEventType } from "@/lib/webhooks/events";
import { treasuryStatus, type WorkerContext } from "./context";

/**
 * The worker's part of the webhooks (docs/webhooks.md): it registers WEBHOOK_URLS as the active endpoints, runs the
 * dispatcher (its own loops, beside the relay pipeline, never blocking it) and watches the alerts it can see:
 * `treasury.low`, `relayer.out_of_gas` (per relayer it holds), `fees.above_ceiling`, `budget.exhausted`. Each
 * alert goes through webhook_report_alert (db/functions/webhooks.sql) with the age of what it saw: sent once when it
 * starts, again only after it ended, however many workers report it. A process reports only what it observed itself,
 * so its silence (nothing seen yet) never ends another's episode. `sponsorship.*` and
 * `sponsorships.paused/resumed` are written by triggers; `worker.down` by the web server
 * (lib/webhooks/worker-watch.ts), since no worker can report its own absence.
 */

export const WEBHOOK_WAKEUP_CHANNEL = "webhook_events";
/** Settled events are kept this long for the dashboard, then pruned with their deliveries. */
const EVENT_RETENTION_MS = 7 * 24 * 3_600_000;
const PRUNE_INTERVAL_MS = 3_600_000;
/**
 * The relay stage reads the treasury once per block while it has requests to send; a worker that relays nothing
 * (idle, paused, or waiting on fees) reads it here at most this often, so `treasury.low` also starts when the
 * treasury is drained while nothing is sent (the owner withdrew, or the last relay took it below). One batched
 * JSON-RPC request a minute at most (three calls), within the idle worker's budget (worker/rpc-cost.test.ts).
 */
const TREASURY_REFRESH_MS = 60_000;
/**
 * A relayer last seen without gas money has its balance read here at most this often, so its alert ends when it is
 * funded although nothing of it is broadcast meanwhile (its transactions are sent again by the confirm stage, which
 * usually notices first). Only those relayers are read: an idle worker with funded relayers makes no call for it.
 */
const RELAYER_GAS_REFRESH_MS = 60_000;

/**
 * How long `fees.above_ceiling` and `budget.exhausted` must be seen clear before they end (webhook_report_alert's
 * clear time), so a next start is a new episode: a rolling budget frees a slot and a client takes it seconds later,
 * a base fee moves around the ceiling block by block, and with the first clear observation ending them each crossing
 * was a new event (one per slot freed and taken again: about a hundred an hour for a budget of 100 an hour at twice that demand). The others end at once: a treasury or
 * a relayer refilled does not fall back below by itself within minutes.
 */
export const ALERT_CLEAR_MS = 300_000;

export type WorkerWebhookOptions = {
  /** The clear time of the alerts that hover at a threshold (default ALERT_CLEAR_MS). */
  alertClearMs?: number;
  dispatcher?: Partial<DispatcherSettings>;
  /** How often the alerts are evaluated (default 5 s). */
  alertIntervalMs?: number;
  /** How old the treasury's state may be before an evaluation reads it itself (default 60 s). */
  treasuryRefreshMs?: number;
  /** How old the view of a relayer without gas money may be before an evaluation reads its balance (default 60 s). */
  relayerGasRefreshMs?: number;
};

export type WorkerWebhooks = { evaluateAlerts: () => Promise<void>; stop: () => Promise<void> };

export async function startWorkerWebhooks(ctx: WorkerContext, config: Config, options: WorkerWebhookOptions = {}): Promise<WorkerWebhooks> {
  const { db, log } = ctx;
  // Also with none configured: endpoints removed from WEBHOOK_URLS stop receiving new events; what was still waiting
  // for them is held (never attempted while they are out) and given up 24 h after the removal (the hourly pass below).
  await syncWebhookEndpoints(db, config.webhookUrls);
  const dispatcher =
    config.webhookUrls.length > 0 && config.webhookSecret
      ? new WebhookDispatcher({
          db,
          endpoints: config.webhookUrls,
          secret: config.webhookSecret,
          log: log.child({ component: "webhooks" }),
          settings: options.dispatcher,
        })
      : undefined;
  let listener: { unlisten: () => Promise<void> } | undefined;
  if (dispatcher) {
    dispatcher.start();
    listener = await db.$client.listen(WEBHOOK_WAKEUP_CHANNEL, () => dispatcher.wake()).catch(() => undefined);
    log.info("webhooks enabled", { endpoints: config.webhookUrls.map((u) => new URL(u).origin) });
  }

  // `readAt`: performance.now() of the observation (another worker may have seen the condition more recently).
  const hovering = new Set<AlertEventType>(["fees.above_ceiling", "budget.exhausted"]);
  const clearMs = options.alertClearMs ?? ALERT_CLEAR_MS;
  const report = async (key: string, type: AlertEventType, active: boolean, data: Record<string, unknown> = {}, readAt = performance.now()) => {
    const observedAgeMs = performance.now() - readAt;
    if (await reportAlert(db, { key, type, active, data, observedAgeMs, clearMs: hovering.has(type) ? clearMs : 0 })) log.warn("alert", { type, ...data });
  };

  let evaluating: Promise<void> | undefined;
  let lastPrune = Number.NEGATIVE_INFINITY; // performance.now(): a step of the wall clock does not move it
  const treasuryRefreshMs = options.treasuryRefreshMs ?? TREASURY_REFRESH_MS;
  // The treasury state last seen and when (performance.now()): the relay stage replaces the object at each read.
  let seenTreasury = ctx.status.treasury;
  let seenTreasuryAt = Number.NEGATIVE_INFINITY;
  const freshTreasury = async () => {
    if (ctx.status.treasury !== seenTreasury) {
      seenTreasury = ctx.status.treasury; // the relay stage read it
      seenTreasuryAt = performance.now();
    }
    if (performance.now() - seenTreasuryAt >= treasuryRefreshMs) {
      seenTreasuryAt = performance.now(); // also after a failed read: tried again a refresh later, not every tick
      try {
        const state = await ctx.chain.treasuryStateAside();
        // Unless the relay stage read it meanwhile (newer than this).
        if (ctx.status.treasury === seenTreasury) {
          ctx.status.treasury = seenTreasury = treasuryStatus(state);
        }
      } catch {
        // The chain is not answering: its health and the heartbeat say so; the last state seen stands.
      }
    }
    return ctx.status.treasury;
  };
  const relayerGasRefreshMs = options.relayerGasRefreshMs ?? RELAYER_GAS_REFRESH_MS;
  // Relayers held and last seen without gas money, for a while: their balance against the transaction refused.
  const refreshRelayerGas = async () => {
    const gas = ctx.status.relayerGas;
    const due = ctx.pool.leased.filter((r) => {
      const seen = gas.get(r);
      return seen?.withoutGas && seen.neededWei !== undefined && performance.now() - seen.seenAtMs >= relayerGasRefreshMs;
    });
    if (due.length === 0) return;
    const before = new Map(due.map((r) => [r, gas.get(r)!]));
    const readAt = performance.now();
    const balances = await ctx.chain.balancesAside(due).catch(() => undefined); // unreachable: the last view stands
    for (const [relayer, seen] of before) {
      const balance = balances?.get(relayer);
      // Unless a broadcast (newer) or a change of lease replaced the view meanwhile.
      if (balance === undefined || gas.get(relayer) !== seen) continue;
      gas.set(relayer, { ...seen, withoutGas: balance < seen.neededWei!, seenAtMs: readAt });
    }
  };
  const evaluate = async () => {
    const treasury = await freshTreasury();
    if (treasury) {
      const left = treasury.amount > 0n ? treasury.balance / treasury.amount : 0n;
      await report(
        "treasury.low",
        "treasury.low",
        left < BigInt(config.treasuryLowSponsorships),
        {
          treasuryAddress: ctx.chain.treasuryAddress,
          balanceWei: treasury.balance.toString(),
          amountWei: treasury.amount.toString(),
          sponsorshipsLeft: Number(left),
          threshold: config.treasuryLowSponsorships,
        },
        treasury.checkedAtMs,
      );
    }
    await refreshRelayerGas();
    // Only relayers this worker holds, from what it observed of each while holding it, as old as that is: one taken
    // over a moment ago has not been seen yet, and its silence must not end the episode its last holder reported.
    for (const relayer of ctx.pool.leased) {
      const seen = ctx.status.relayerGas.get(relayer);
      if (seen) await report(`relayer.out_of_gas:${relayer}`, "relayer.out_of_gas", seen.withoutGas, { relayerAddress: relayer }, seen.seenAtMs);
    }
    // A relayer whose key no running worker has any more is held by none, so none would end its alert.
    const retired = await endRetiredRelayerAlerts(db);
    if (retired.length > 0) log.info("relayer.out_of_gas ended for relayers retired from every worker", { relayers: retired });
    const fees = ctx.feeCeiling?.state;
    if (fees?.checkedAt) {
      await report(
        "fees.above_ceiling",
        "fees.above_ceiling",
        fees.aboveCeiling,
        {
          ceilingWei: fees.ceilingWei.toString(),
          baseFeeWei: fees.baseFeeWei?.toString() ?? null,
          since: fees.since?.toISOString() ?? null,
        },
        fees.checkedAtMs,
      );
    }
    if (config.sponsorBudgetPerHour > 0 || config.sponsorBudgetPerDay > 0) {
      const readAt = performance.now();
      const refusal = await readBudgetExhaustion(db, { perHour: config.sponsorBudgetPerHour, perDay: config.sponsorBudgetPerDay });
      await report(
        "budget.exhausted",
        "budget.exhausted",
        refusal !== null,
        {
          window: refusal?.window ?? null,
          retryAt: refusal ? new Date(refusal.retryAtMs).toISOString() : null,
          budgetPerHour: config.sponsorBudgetPerHour,
          budgetPerDay: config.sponsorBudgetPerDay,
        },
        readAt,
      );
    }
    if (performance.now() - lastPrune >= PRUNE_INTERVAL_MS) {
      lastPrune = performance.now();
      const givenUp = await giveUpRemovedEndpointDeliveries(db);
      if (givenUp > 0) log.info("webhook deliveries to removed endpoints given up", { deliveries: givenUp });
      await pruneWebhookEvents(db, EVENT_RETENTION_MS);
    }
  };
  const evaluateAlerts = () =>
    (evaluating ??= evaluate()
      .catch((error: unknown) => log.warn("alert evaluation failed", { error: error instanceof Error ? error.message : String(error) }))
      .finally(() => (evaluating = undefined)));

  // The fee ceiling's episodes are reported as they start and end, not only at the next tick.
  const feeCeiling = ctx.feeCeiling;
  if (feeCeiling) {
    const previous = feeCeiling.onChange;
    feeCeiling.onChange = (change) => {
      previous?.(change);
      void evaluateAlerts();
    };
  }
  const timer = setInterval(() => void evaluateAlerts(), options.alertIntervalMs ?? 5_000);
  timer.unref();

  return {
    evaluateAlerts,
    stop: async () => {
      clearInterval(timer);
      await evaluating;
      await listener?.unlisten().catch(() => {});
      await dispatcher?.stop();
    },
  };
}
