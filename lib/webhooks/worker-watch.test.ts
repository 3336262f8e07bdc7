import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { upsertHeartbeat } from "@/db/queries/heartbeats";
import { reportAlert, syncWebhookEndpoints } from "@/db/queries/webhooks";
import { createLogger } from "@/lib/log";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { startWebhookReceiver, type WebhookReceiver } from "@/test/webhook-receiver";
import { WorkerWatch } from "./worker-watch";

/**
 * worker.down (decisions.md "Operators are told": no live worker heartbeat for 60 s, here shortened): noticed by the
 * web server's watch, sent once per episode and delivered by the watch itself, since no worker is there to do it.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
let t: TestDatabase;
let r: WebhookReceiver;

beforeAll(async () => {
  t = await createTestDatabase();
  r = await startWebhookReceiver();
  await syncWebhookEndpoints(t.db, [r.url]);
});

afterAll(async () => {
  await r?.close();
  await t?.drop();
});

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** A watch with the limit and the retries shortened, delivering to the test receiver. */
const quickWatch = () =>
  new WorkerWatch({
    db: t.db,
    log: createLogger({ test: "worker-watch" }),
    endpoints: [r.url],
    secret: SECRET,
    downAfterMs: 300,
    dispatcher: { baseDelayMs: 50, maxDelayMs: 100 },
  });

describe("worker.down", () => {
  it("is sent once when no worker heartbeat was seen for the limit, delivered without a worker, and again only after a worker was back", async () => {
    const watch = quickWatch();
    // No worker has ever beaten: down once the limit has passed since the watch started.
    await waitUntil("the watch to call the workers down", () => watch.check());
    for (let i = 0; i < 5; i++) expect(await watch.check()).toBe(true);
    const down = () => r.ofType("worker.down");
    expect(down()).toHaveLength(1);
    new Webhook(SECRET).verify(down()[0]!.body, down()[0]!.headers);
    expect(down()[0]!.json.data).toMatchObject({ lastHeartbeatAt: null });

    // A worker beats: the episode ends, nothing is sent.
    await upsertHeartbeat(t.db, { workerId: "w1", hostname: "h", pid: 1, startedAt: new Date(), details: {} });
    expect(await watch.check()).toBe(false);
    const [state] = await t.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = 'worker.down'`);
    expect(state!.active).toBe(false);

    // It stops beating (a SIGKILLed worker leaves its row behind): once the limit has passed since the last beat
    // the watch saw, a new episode, a second event.
    await t.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() - interval '1 hour'`);
    await waitUntil("the watch to call the workers down again", () => watch.check());
    expect(down()).toHaveLength(2);
    expect(down()[1]!.json.data.lastHeartbeatAt).toEqual(expect.any(String));
    await watch.stop();
  });

  it("is sent when the workers stop after the wall clock stepped back", async () => {
    await t.db.execute(sql`DELETE FROM worker_heartbeats`);
    const watch = quickWatch();
    try {
      const before = r.ofType("worker.down").length;
      await upsertHeartbeat(t.db, { workerId: "w2", hostname: "h", pid: 2, startedAt: new Date(), details: {} });
      expect(await watch.check()).toBe(false);
      // Date steps back an hour (NTP, a restored VM); timers and performance.now() do not, as with a real step. Then
      // the worker dies. Before, the last beat was kept on the wall clock, an hour in the new clock's future: no
      // worker.down for the hour.
      vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
      await t.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() - interval '1 second'`);
      await waitUntil("the watch to call the workers down", () => watch.check(), 5_000);
      expect(r.ofType("worker.down")).toHaveLength(before + 1);
    } finally {
      vi.useRealTimers();
      await watch.stop();
    }
  });

  it("calls the workers down at its first look when the newest heartbeat is older than the limit (older than this process)", async () => {
    await t.db.execute(sql`DELETE FROM alert_state WHERE key = 'worker.down'`); // a new episode
    await upsertHeartbeat(t.db, { workerId: "w3", hostname: "h", pid: 3, startedAt: new Date(), details: {} });
    await t.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() - interval '10 hours'`);
    const watch = new WorkerWatch({ db: t.db, log: createLogger({ test: "worker-watch" }), endpoints: [], secret: SECRET });
    try {
      // The production limit (60 s), with a heartbeat ten hours old: down at once, not 60 s after this watch started.
      expect(await watch.check()).toBe(true);
      // The alert names the heartbeat as the database stored it.
      const [stored] = await t.db.execute<{ at: string }>(sql`SELECT max(last_beat_at)::text AS at FROM worker_heartbeats`);
      const [alert] = await t.db.execute<{ data: { lastHeartbeatAt: string } }>(
        sql`SELECT data FROM webhook_events WHERE type = 'worker.down' ORDER BY seq DESC LIMIT 1`,
      );
      expect(new Date(alert!.data.lastHeartbeatAt).getTime()).toBe(new Date(stored!.at).getTime());
    } finally {
      await watch.stop();
    }
  });

  it("is neither ended nor sent again by a watch that started after it and has seen no heartbeat (a web server restarted during the outage)", async () => {
    await t.db.execute(sql`DELETE FROM worker_heartbeats`);
    await t.db.execute(sql`DELETE FROM alert_state WHERE key = 'worker.down'`);
    const events = async () => (await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = 'worker.down'`))[0]!.n;
    const before = await events();
    const first = quickWatch();
    const second = quickWatch();
    try {
      await waitUntil("the first watch to call the workers down", () => first.check());
      expect(await events()).toBe(before + 1);
      // A watch started just now (the production limit, 60 s) has seen no heartbeat and not watched for the limit:
      // it knows nothing. Before, its "not down" ended the episode, and the first watch's next look started (and sent)
      // a new one.
      const restarted = new WorkerWatch({ db: t.db, log: createLogger({ test: "worker-watch" }), endpoints: [r.url], secret: SECRET });
      try {
        expect(await restarted.check()).toBe(false);
        expect(await first.check()).toBe(true);
        expect(await second.check()).toBe(true);
      } finally {
        await restarted.stop();
      }
      const [state] = await t.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = 'worker.down'`);
      expect(state!.active).toBe(true);
      expect(await events()).toBe(before + 1);
    } finally {
      await first.stop();
      await second.stop();
    }
  });

  it("adds no endpoint of its own once a worker has registered the endpoints (one the workers lack would never be delivered to)", async () => {
    const extra = "http://127.0.0.1:9/only-the-web-server-lists-it";
    await syncWebhookEndpoints(t.db, [r.url]);
    const watch = new WorkerWatch({ db: t.db, log: createLogger({ test: "worker-watch" }), endpoints: [r.url, extra], secret: SECRET });
    try {
      await watch.check();
      const rows = await t.db.execute<{ url: string; active: boolean }>(sql`SELECT url, active FROM webhook_endpoints ORDER BY url`);
      expect(rows.map((row) => row.url)).toEqual([r.url]);
    } finally {
      await watch.stop();
    }
  });

  it("reaches the web server's own endpoints when no worker ever registered them", async () => {
    await t.db.execute(sql`DELETE FROM worker_heartbeats`);
    await t.db.execute(sql`DELETE FROM alert_state WHERE key = 'worker.down'`);
    // No worker started with WEBHOOK_URLS (the first deployment, a worker that never got past its start-up).
    await t.db.execute(sql`DELETE FROM webhook_endpoints`);
    const before = r.ofType("worker.down").length;
    const watch = quickWatch();
    try {
      await waitUntil("the watch to call the workers down", () => watch.check());
      // Before, the alert was marked started with no endpoint to write its event for, and never sent.
      await waitUntil("the event delivered", async () => r.ofType("worker.down").length === before + 1);
    } finally {
      await watch.stop();
    }
  });
});

describe("an alert several processes report, each from what it last saw", () => {
  it("is ended only by an observation newer than its start, and started again only by one newer than its end (treasury.low: a worker that read the treasury a minute ago)", async () => {
    await syncWebhookEndpoints(t.db, [r.url]);
    const report = (active: boolean, observedAgeMs: number) =>
      reportAlert(t.db, { key: "treasury.low", type: "treasury.low", active, data: {}, observedAgeMs });
    const events = async () => (await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = 'treasury.low'`))[0]!.n;
    const before = await events();
    // A worker that relays reads the treasury every block: it sees the balance fall below the threshold.
    expect(await report(true, 0)).toBe(true);
    // An idle worker's reading is 50 s old, from before the drop: it does not end the episode (before, it did, and
    // the first worker's next report started a new one: one more event every 5 s for up to a minute).
    expect(await report(false, 50_000)).toBe(false);
    expect(await report(true, 0)).toBe(false);
    expect(await events()).toBe(before + 1);
    // Refunded: the relaying worker's fresh reading ends it; the idle worker's older "low" does not start it again.
    expect(await report(false, 0)).toBe(false);
    expect(await report(true, 30_000)).toBe(false);
    const [state] = await t.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = 'treasury.low'`);
    expect(state!.active).toBe(false);
    expect(await events()).toBe(before + 1);
    // A fresh "low" after the end is a new episode.
    expect(await report(true, 0)).toBe(true);
    expect(await events()).toBe(before + 2);
  });

  it("with a clear time, ends only once seen clear that long: a condition hovering at its threshold is one episode, not one per crossing", async () => {
    await syncWebhookEndpoints(t.db, [r.url]);
    const key = "fees.above_ceiling";
    const clearMs = 2_000;
    const report = (active: boolean) => reportAlert(t.db, { key, type: key, active, data: {}, clearMs });
    const events = async () => (await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = ${key}`))[0]!.n;
    const state = async () =>
      (
        await t.db.execute<{ active: boolean; clearSince: Date | null; endedAt: Date | null }>(
          sql`SELECT active, clear_since AS "clearSince", ended_at AS "endedAt" FROM alert_state WHERE key = ${key}`,
        )
      )[0]!;
    const before = await events();
    expect(await report(true)).toBe(true);
    // The base fee moving around the ceiling block by block (or two workers reading two endpoints): before, each
    // crossing back above it after one below was a new episode, with its event.
    for (let i = 0; i < 3; i++) {
      expect(await report(false)).toBe(false);
      expect((await state()).clearSince).not.toBeNull();
      expect(await report(true)).toBe(false);
      expect((await state()).clearSince).toBeNull();
    }
    expect((await state()).active).toBe(true);
    expect(await events()).toBe(before + 1);
    // Clear from here on: it ends at the first report clearMs after the first clear one.
    await report(false);
    const clearSince = (await state()).clearSince!;
    await waitUntil("the alert to end", async () => (await report(false), !(await state()).active));
    const ended = await state();
    expect(new Date(ended.endedAt!).getTime() - new Date(clearSince).getTime()).toBeGreaterThanOrEqual(clearMs);
    expect(ended.clearSince).toBeNull();
    // Seen above the ceiling after that: a new episode.
    expect(await report(true)).toBe(true);
    expect(await events()).toBe(before + 2);
    // A clear_since from before this start (revision 2's bodies, after a rollback, restart alerts without touching
    // it) is stale: a clear report begins a new spell, it does not end the episode at once.
    await t.db.execute(sql`UPDATE alert_state SET clear_since = since - interval '1 hour' WHERE key = ${key}`);
    expect(await report(false)).toBe(false);
    expect((await state()).active).toBe(true);
  });

  it("is not started while no endpoint is active (its event could not be written), and is started and sent by the first report after one is added", async () => {
    await syncWebhookEndpoints(t.db, []);
    const report = () => reportAlert(t.db, { key: "budget.exhausted", type: "budget.exhausted", active: true, data: {} });
    expect(await report()).toBe(false);
    const [state] = await t.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = 'budget.exhausted'`);
    expect(state?.active ?? false).toBe(false);
    await syncWebhookEndpoints(t.db, [r.url]);
    expect(await report()).toBe(true);
    const [event] = await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = 'budget.exhausted'`);
    expect(event!.n).toBe(1);
  });
});
