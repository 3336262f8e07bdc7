import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { enqueueWebhookEvent, syncWebhookEndpoints } from "@/db/queries/webhooks";
import { createLogger } from "@/lib/log";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { DEFAULT_DISPATCHER_SETTINGS, postWebhook, retryDelayMs, retryInMs, WebhookDispatcher } from "./dispatcher";

/**
 * decisions.md "Operators are told": "A 2xx answer within 10 s is a delivery; anything else is retried with backoff for
 * at least 24 hours." The worker's tests shorten these to run fast (worker/webhooks.test.ts); here are the figures
 * production runs with, and one attempt against a real HTTP server.
 */

const HOUR = 3_600_000;
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? "/";
    req.resume();
    if (path === "/slow") setTimeout(() => res.writeHead(200).end(), 1_000).unref();
    else if (path === "/redirect") res.writeHead(307, { location: "/ok" }).end();
    else if (path === "/error") res.writeHead(500).end();
    else res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("webhook delivery: what production runs with", () => {
  it("waits 10 s for an answer and retries for 24 hours, then gives up", () => {
    expect(DEFAULT_DISPATCHER_SETTINGS.timeoutMs).toBe(10_000);
    expect(DEFAULT_DISPATCHER_SETTINGS.retryForMs).toBeGreaterThanOrEqual(24 * HOUR);
    const retry = (ageMs: number, attempts: number) => retryInMs({ attempts, ageMs }, DEFAULT_DISPATCHER_SETTINGS);
    expect(retry(24 * HOUR - 60_000, 20)).toBeGreaterThan(0);
    expect(retry(24 * HOUR, 20)).toBeUndefined();
  });

  it("backs off: doubling from 5 s with jitter, never beyond an hour", () => {
    const low = () => 0;
    const high = () => 1;
    expect([1, 2, 3].map((a) => [retryDelayMs(a, DEFAULT_DISPATCHER_SETTINGS, low), retryDelayMs(a, DEFAULT_DISPATCHER_SETTINGS, high)])).toEqual([
      [2_500, 5_000],
      [5_000, 10_000],
      [10_000, 20_000],
    ]);
    expect(retryDelayMs(30, DEFAULT_DISPATCHER_SETTINGS, high)).toBe(HOUR);
    // An endpoint that comes back within the day is tried again within the hour.
    let elapsed = 0;
    let attempts = 0;
    while (elapsed < 24 * HOUR) elapsed += retryDelayMs(++attempts, DEFAULT_DISPATCHER_SETTINGS, high);
    expect(attempts).toBeGreaterThan(20);
  });

  it("counts a 2xx within the timeout as delivered, and a late answer, a redirect or a 500 as not", async () => {
    expect(await postWebhook(`${url}/ok`, {}, "{}", 500)).toMatchObject({ delivered: true, statusCode: 204 });
    expect(await postWebhook(`${url}/slow`, {}, "{}", 200)).toMatchObject({ delivered: false, error: "no answer within 200 ms" });
    expect(await postWebhook(`${url}/redirect`, {}, "{}", 500)).toMatchObject({ delivered: false, statusCode: 307 });
    expect(await postWebhook(`${url}/error`, {}, "{}", 500)).toMatchObject({ delivered: false, statusCode: 500 });
  });
});

/** A dispatcher for `endpoint` on `t` that retries a failed attempt after a minute (never within a test). */
function minuteRetries(t: TestDatabase, endpoint: string): WebhookDispatcher {
  return new WebhookDispatcher({
    db: t.db,
    endpoints: [endpoint],
    secret: `whsec_${randomBytes(32).toString("base64")}`,
    log: createLogger({ test: "dispatcher" }),
    settings: { baseDelayMs: 60_000, maxDelayMs: 60_000 },
  });
}

describe("webhook retries and the wall clock", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => t?.drop());

  it("schedules the next attempt on the database's clock: a step back of this process's does not retry at once", async () => {
    const endpoint = `${url}/error`;
    await syncWebhookEndpoints(t.db, [endpoint]);
    await enqueueWebhookEvent(t.db, "treasury.low", { test: true });
    const dispatcher = minuteRetries(t, endpoint);
    // Date an hour behind (NTP correcting a fast clock, a restored VM); the database's clock is not.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - HOUR });
    try {
      expect(await dispatcher.deliverDue(endpoint)).toBe(1); // answered 500: to be retried in 30-60 s
      // Before, the retry was due at this process's now + 30-60 s, an hour in the database's past: claimed again at
      // once, every pass, without backoff (and the 24-hour window counted from the wrong clock).
      expect(await dispatcher.deliverDue(endpoint)).toBe(0);
      const [row] = await t.db.execute<{ wait: number }>(sql`SELECT extract(epoch FROM next_attempt_at - now())::float8 AS wait FROM webhook_deliveries`);
      expect(row!.wait).toBeGreaterThan(25);
      expect(row!.wait).toBeLessThanOrEqual(60);
    } finally {
      vi.useRealTimers();
      await dispatcher.stop();
    }
  });
});

describe("a delivery that fails before anything is sent", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => t?.drop());

  it("is a failed attempt: retried on the schedule, given up after the retry window, the others delivered meanwhile", async () => {
    const endpoint = `${url}/ok`;
    await syncWebhookEndpoints(t.db, [endpoint]);
    // A sponsorship event whose snapshot has no request: its body cannot be rendered (webhookBody throws).
    await enqueueWebhookEvent(t.db, "sponsorship.completed", { broken: true });
    await enqueueWebhookEvent(t.db, "treasury.low", { test: true });
    const dispatcher = minuteRetries(t, endpoint);
    const deliveries = () =>
      t.db.execute<{ type: string; status: string; attempts: number; error: string | null; wait: number }>(sql`
        SELECT e.type, d.status, d.attempts, d.last_error AS error, extract(epoch FROM d.next_attempt_at - now())::float8 AS wait
        FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id ORDER BY e.type`);
    try {
      // Before, the throw rejected the whole pass and left the claim to run out: claimed again every 30 s, for ever.
      expect(await dispatcher.deliverDue(endpoint)).toBe(2);
      const [broken, low] = await deliveries();
      expect(low).toMatchObject({ type: "treasury.low", status: "delivered" });
      expect(broken).toMatchObject({ type: "sponsorship.completed", status: "pending", attempts: 1 });
      expect(broken!.error).toMatch(/^not sent: /);
      expect(broken!.wait).toBeGreaterThan(25); // the backoff (30-60 s), not the claim's lease
      expect(broken!.wait).toBeLessThanOrEqual(60);

      // Due again once the retry window (24 h) has passed: this failed attempt gives it up.
      await t.db.execute(sql`UPDATE webhook_deliveries SET created_at = now() - interval '25 hours', next_attempt_at = now() WHERE status = 'pending'`);
      expect(await dispatcher.deliverDue(endpoint)).toBe(1);
      expect((await deliveries())[0]).toMatchObject({ status: "failed", attempts: 2 });
      expect(await dispatcher.deliverDue(endpoint)).toBe(0);
    } finally {
      await dispatcher.stop();
    }
  });
});
