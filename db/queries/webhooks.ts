import { sql } from "drizzle-orm";
import type { WebhookDeliveryStatus } from "@/db/schema";
import { lockKeys } from "@/db/sql/advisory-locks";
import { run, type Executor } from "@/db/sql/run";
import { isoUtc } from "@/db/sql/fragments";
import { relayerInService } from "./relayers";

/**
 * The webhooks' outbox (decisions.md "Operators are told"): endpoints, events, deliveries and alert state. Events
 * are written by the SQL functions of db/functions/webhooks.sql in the transaction of the change they announce;
 * these queries register endpoints, claim and settle deliveries (lib/webhooks/dispatcher.ts), start and end
 * alerts, and read deliveries for the dashboard.
 */

/**
 * Why a delivery to an endpoint that is no longer in WEBHOOK_URLS was given up (its `last_error`): it is never
 * attempted again, and the retention prune removes it like any other settled delivery.
 */
export const ENDPOINT_REMOVED_ERROR = "endpoint removed from WEBHOOK_URLS";

/**
 * How long the deliveries waiting for a removed endpoint are held (not attempted, not given up) before they are
 * given up: the retry window decisions.md promises ("retried with backoff for at least 24 hours"). A removal by
 * mistake (one process started with a shorter list) loses nothing if it is undone within it.
 */
export const REMOVED_ENDPOINT_GRACE_MS = 24 * 60 * 60_000;

/**
 * Makes exactly `urls` the active endpoints (others stay for their history, inactive). What is still waiting for an
 * endpoint removed here is held: never claimed while it is inactive (claimDueDeliveries), resumed if it is added
 * back within REMOVED_ENDPOINT_GRACE_MS, given up after that (giveUpRemovedEndpointDeliveries).
 */
export async function syncWebhookEndpoints(db: Executor, urls: readonly string[]): Promise<void> {
  const list = JSON.stringify(urls);
  await withEndpointsLocked(db, (tx) =>
    run(
      tx,
      sql`
    WITH wanted AS (SELECT value AS url FROM jsonb_array_elements_text(${list}::jsonb)),
    upserted AS (
      INSERT INTO webhook_endpoints (url, active) SELECT url, true FROM wanted
      ON CONFLICT (url) DO UPDATE SET active = true, updated_at = now() WHERE webhook_endpoints.active = false
      RETURNING url)
    UPDATE webhook_endpoints SET active = false, updated_at = now()
    WHERE active AND url NOT IN (SELECT url FROM wanted)`,
    ),
  );
}

/**
 * The web server's registration of its own WEBHOOK_URLS while no endpoint was ever registered (no worker has started
 * with WEBHOOK_URLS yet), so `worker.down` reaches them even then; otherwise it changes nothing. A worker's start-up
 * alone adds, removes and brings back endpoints (syncWebhookEndpoints): a web server still running with an old list
 * does not undo a removal, and one whose list has an endpoint the workers' lack (a typo, a rolling change that reached
 * the web servers first) does not add it. Until session 26 it did: every event then got a delivery for it that no
 * worker sends (each delivers to its own list), never given up (that is decided after an attempt), and no event was
 * pruned while it waited, so the outbox grew until a worker restarted.
 */
export async function registerWebhookEndpoints(db: Executor, urls: readonly string[]): Promise<void> {
  await withEndpointsLocked(db, (tx) =>
    run(
      tx,
      sql`
      INSERT INTO webhook_endpoints (url, active) SELECT value, true FROM jsonb_array_elements_text(${JSON.stringify(urls)}::jsonb)
      WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints)
      ON CONFLICT (url) DO NOTHING`,
    ),
  );
}

/**
 * Runs a change of the endpoint list one at a time across every process (a transaction-level advisory lock, taken
 * before the statement whose snapshot then sees what the previous holder committed). Without it a web server's first
 * registration and a worker's start-up sync on other hosts, at once on an empty table, each saw it empty: the web
 * server's own endpoints were inserted beside the worker's list, which did not see them to deactivate them.
 */
function withEndpointsLocked(db: Executor, change: (tx: Executor) => Promise<unknown>): Promise<void> {
  return db.transaction(async (tx) => {
    await lockKeys(tx, ["webhook_endpoints"]);
    await change(tx);
  });
}

/**
 * Gives up the deliveries still pending for an endpoint removed from WEBHOOK_URLS more than `graceMs` ago (status
 * `failed`, last error ENDPOINT_REMOVED_ERROR); returns how many. The worker runs it before each prune, which then
 * removes them like any other settled delivery.
 */
export async function giveUpRemovedEndpointDeliveries(db: Executor, graceMs: number = REMOVED_ENDPOINT_GRACE_MS): Promise<number> {
  const rows = await run(
    db,
    sql`
    UPDATE webhook_deliveries d SET status = 'failed', last_error = ${ENDPOINT_REMOVED_ERROR}
    WHERE d.status = 'pending' AND EXISTS (
      SELECT 1 FROM webhook_endpoints w
      WHERE w.url = d.endpoint AND NOT w.active AND w.updated_at <= now() - make_interval(secs => ${graceMs / 1000}))
    RETURNING d.id`,
  );
  return rows.length;
}

/** Writes one event (and a delivery per active endpoint); undefined when no endpoint is active. */
export async function enqueueWebhookEvent(db: Executor, type: string, data: Record<string, unknown>): Promise<string | undefined> {
  const rows = await run<{ id: string | null }>(db, sql`SELECT webhook_enqueue(${type}, ${JSON.stringify(data)}::jsonb) AS id`);
  return rows[0]?.id ?? undefined;
}

/**
 * Starts (`active`) or ends an alert, as observed `observedAgeMs` ago (default: now). The event is written only when
 * this call starts it: once per episode, however many processes report the condition, each from what it last saw
 * (an observation older than the episode's start does not end it; one older than its end does not restart it). Not
 * started while no endpoint is active. Returns whether this call started it.
 */
export async function reportAlert(
  db: Executor,
  input: {
    key: string;
    type: string;
    active: boolean;
    data?: Record<string, unknown>;
    observedAgeMs?: number;
    /** How long its condition must be seen clear before an active alert ends (default 0: at the first clear report). */
    clearMs?: number;
  },
): Promise<boolean> {
  const age = Math.max(0, Math.round(input.observedAgeMs ?? 0));
  const clear = Math.max(0, Math.round(input.clearMs ?? 0));
  const rows = await run<{ started: boolean }>(
    db,
    sql`SELECT webhook_report_alert(${input.key}, ${input.type}, ${input.active}, ${JSON.stringify(input.data ?? {})}::jsonb, ${age}::bigint, ${clear}::bigint) AS started`,
  );
  return rows[0]?.started === true;
}

/**
 * Ends the `relayer.out_of_gas` alerts of relayers no longer in service (relayerInService: their key in no running
 * worker's RELAYER_PRIVATE_KEYS, nothing of theirs open): no worker holds them, so none would ever report the end.
 * Through webhook_report_alert, as an observation of now; a relayer put back in service starts a new episode when its
 * worker sees it without gas money. Returns the relayers whose alert this ended.
 */
export async function endRetiredRelayerAlerts(db: Executor): Promise<string[]> {
  const rows = await run<{ relayer: string }>(
    db,
    sql`
    WITH retired AS MATERIALIZED (
      SELECT a.key, a.type, split_part(a.key, ':', 2) AS relayer FROM alert_state a
      WHERE a.type = 'relayer.out_of_gas' AND a.active AND NOT ${relayerInService(sql`split_part(a.key, ':', 2)`)})
    SELECT r.relayer, webhook_report_alert(r.key, r.type, false, '{}'::jsonb, 0) AS started FROM retired r ORDER BY r.relayer`,
  );
  return rows.map((r) => r.relayer);
}

export type ClaimedDelivery = {
  id: number;
  endpoint: string;
  attempts: number;
  eventId: string;
  type: string;
  data: Record<string, unknown>;
  /** When the event happened (ISO 8601, UTC, milliseconds). */
  occurredAt: string;
  /** How long ago (ms, on the database's clock) the first delivery of this event was due: the retry window counts from it. */
  ageMs: number;
};

/**
 * Claims up to `limit` due deliveries of one endpoint: each is leased for `leaseMs` (another dispatcher skips it
 * while the attempt runs, and retries it if this one dies), its attempt counted. A delivery waits while an earlier
 * event of the same request is still pending at that endpoint, so a receiver sees a request's events in order.
 * Nothing is claimed for an endpoint that is no longer active (removed from WEBHOOK_URLS by a process started since),
 * even by a process still running with the old list: what waits for it is held (syncWebhookEndpoints).
 */
export async function claimDueDeliveries(db: Executor, input: { endpoint: string; limit: number; leaseMs: number }): Promise<ClaimedDelivery[]> {
  const rows = await run<{
    id: string;
    endpoint: string;
    attempts: number;
    event_id: string;
    type: string;
    data: Record<string, unknown>;
    occurred_at: string;
    age_ms: string;
  }>(
    db,
    sql`
    WITH due AS (
      SELECT d.id FROM webhook_deliveries d
      WHERE d.endpoint = ${input.endpoint} AND d.status = 'pending' AND d.next_attempt_at <= now()
        AND EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.url = ${input.endpoint} AND w.active)
        AND (d.sponsorship_request_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM webhook_deliveries p
          WHERE p.endpoint = d.endpoint AND p.sponsorship_request_id = d.sponsorship_request_id
            AND p.status = 'pending' AND p.event_seq < d.event_seq))
      ORDER BY d.next_attempt_at, d.event_seq
      LIMIT ${input.limit}
      FOR UPDATE SKIP LOCKED)
    UPDATE webhook_deliveries d
    SET attempts = d.attempts + 1, last_attempt_at = now(), next_attempt_at = now() + ${input.leaseMs} * interval '1 millisecond'
    FROM due, webhook_events e
    WHERE d.id = due.id AND e.id = d.event_id
    RETURNING d.id::text, d.endpoint, d.attempts, e.id AS event_id, e.type, e.data,
      ${isoUtc(sql`e.created_at`)} AS occurred_at, floor(extract(epoch FROM now() - d.created_at) * 1000)::bigint::text AS age_ms`,
  );
  return rows
    .map((r) => ({
      id: Number(r.id),
      endpoint: r.endpoint,
      attempts: r.attempts,
      eventId: r.event_id,
      type: r.type,
      data: r.data,
      occurredAt: r.occurred_at,
      ageMs: Number(r.age_ms),
    }))
    .sort((a, b) => a.id - b.id);
}

/**
 * Settles a claimed attempt: delivered, retried `retryInMs` from now (the database's `now()`, which the claim
 * compares with: no other clock is mixed in), or given up (`retryInMs` undefined). Only the claim's
 * own attempt is settled (a dispatcher whose lease ran out cannot overwrite a later attempt's outcome). An attempt
 * in flight when its delivery was given up (its endpoint removed long enough) is recorded if it was delivered; a
 * failure leaves it given up, never pending again.
 */
export async function settleDelivery(
  db: Executor,
  input: { id: number; attempts: number; delivered: boolean; statusCode: number | null; error: string | null; retryInMs: number | undefined },
): Promise<void> {
  const status: WebhookDeliveryStatus = input.delivered ? "delivered" : input.retryInMs !== undefined ? "pending" : "failed";
  await run(
    db,
    sql`
    UPDATE webhook_deliveries SET
      status = ${status}::webhook_delivery_status,
      last_status_code = ${input.statusCode},
      last_error = ${input.error},
      delivered_at = CASE WHEN ${input.delivered} THEN now() ELSE NULL END,
      next_attempt_at = coalesce(now() + ${input.retryInMs ?? null}::float8 * interval '1 millisecond', next_attempt_at)
    WHERE id = ${input.id} AND attempts = ${input.attempts}
      AND (status = 'pending' OR (${input.delivered} AND status = 'failed' AND last_error = ${ENDPOINT_REMOVED_ERROR}))`,
  );
}

/**
 * Events older than `olderThanMs` whose deliveries are all settled (their deliveries go with them); returns how many.
 * In statements of at most `batch` events, each its own transaction, as the other prunes: a backlog (a worker that
 * did not prune for weeks) in one DELETE ran past the driver's answer timeout, was rolled back, and was tried again
 * the next hour, as large. Each batch walks on, oldest first, from where the last one ended (its newest event's time
 * and id, the time as text to keep its microseconds): events still held by a pending delivery are passed once, not
 * read again by every batch.
 */
export async function pruneWebhookEvents(db: Executor, olderThanMs: number, batch = 5_000): Promise<number> {
  let total = 0;
  let after: { at: string; id: string } | undefined;
  for (;;) {
    const rows = await run<{ n: number; at: string | null; id: string | null }>(
      db,
      sql`
      WITH due AS (
        SELECT e.id, e.created_at FROM webhook_events e
        WHERE e.created_at < now() - ${olderThanMs} * interval '1 millisecond'
          ${
            after
              ? // The first condition is the index's range (created_at); the second drops what the last batch passed.
                sql`AND e.created_at >= ${after.at}::timestamptz
                    AND (e.created_at > ${after.at}::timestamptz OR e.id > ${after.id}::uuid)`
              : sql``
          }
          AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.status = 'pending')
        ORDER BY e.created_at, e.id
        LIMIT ${batch}
      ), gone AS (
        DELETE FROM webhook_events w USING due WHERE w.id = due.id RETURNING w.id
      ), last AS (
        SELECT created_at::text AS at, id::text AS id FROM due ORDER BY created_at DESC, id DESC LIMIT 1
      )
      SELECT (SELECT count(*)::int FROM gone) AS n, last.at, last.id FROM (SELECT 1) one LEFT JOIN last ON true`,
    );
    const row = rows[0];
    const n = row?.n ?? 0;
    total += n;
    if (n < batch || !row?.at || !row.id) return total;
    after = { at: row.at, id: row.id };
  }
}

export type DeliveryView = {
  id: number;
  endpoint: string;
  eventId: string;
  type: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  lastAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
  deliveredAt: string | null;
  createdAt: string;
};

export type EndpointDeliveries = { url: string; active: boolean; pending: number; failed: number; recent: DeliveryView[] };

/** The dashboard's view: every endpoint (active first) with its pending and failed counts and latest deliveries. */
export async function listEndpointDeliveries(db: Executor, perEndpoint: number): Promise<EndpointDeliveries[]> {
  const rows = await run<{ url: string; active: boolean; pending: number; failed: number; recent: DeliveryView[] | null }>(
    db,
    sql`
    SELECT e.url, e.active,
      (SELECT count(*)::int FROM webhook_deliveries d WHERE d.endpoint = e.url AND d.status = 'pending') AS pending,
      (SELECT count(*)::int FROM webhook_deliveries d WHERE d.endpoint = e.url AND d.status = 'failed') AS failed,
      (SELECT json_agg(x ORDER BY x."createdAt" DESC, x.id DESC) FROM (
        SELECT d.id, d.endpoint, d.event_id AS "eventId", v.type, d.status, d.attempts,
          CASE WHEN d.status = 'pending' THEN ${isoUtc(sql`d.next_attempt_at`)} END AS "nextAttemptAt",
          ${isoUtc(sql`d.last_attempt_at`)} AS "lastAttemptAt", d.last_status_code AS "lastStatusCode", d.last_error AS "lastError",
          ${isoUtc(sql`d.delivered_at`)} AS "deliveredAt", ${isoUtc(sql`d.created_at`)} AS "createdAt"
        FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id
        WHERE d.endpoint = e.url ORDER BY d.created_at DESC, d.id DESC LIMIT ${perEndpoint}) x) AS recent
    FROM webhook_endpoints e ORDER BY e.active DESC, e.url`,
  );
  return rows.map((r) => ({ url: r.url, active: r.active, pending: r.pending, failed: r.failed, recent: r.recent ?? [] }));
}

/**
 * The newest worker heartbeat: when it was written and its age in ms, both on the database's clock; undefined when
 * no worker ever beat (or all stopped).
 */
export async function newestHeartbeat(db: Executor): Promise<{ lastBeatAt: Date; ageMs: number } | undefined> {
  const rows = await run<{ last_beat_at: Date | string | null; age_ms: string | null }>(
    db,
    sql`SELECT max(last_beat_at) AS last_beat_at,
          floor(extract(epoch FROM now() - max(last_beat_at)) * 1000)::bigint::text AS age_ms
        FROM worker_heartbeats`,
  );
  const row = rows[0];
  if (!row || row.last_beat_at === null || row.age_ms === null) return undefined;
  return { lastBeatAt: new Date(row.last_beat_at), ageMs: Number(row.age_ms) };
}
