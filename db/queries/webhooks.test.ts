import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import {
  ENDPOINT_REMOVED_ERROR,
  claimDueDeliveries,
  enqueueWebhookEvent,
  giveUpRemovedEndpointDeliveries,
  pruneWebhookEvents,
  registerWebhookEndpoints,
  REMOVED_ENDPOINT_GRACE_MS,
  settleDelivery,
  syncWebhookEndpoints,
} from "./webhooks";

/**
 * Endpoints removed from WEBHOOK_URLS (docs/webhooks.md "Removing an endpoint"): the deliveries still waiting for one
 * are held, never claimed while it is inactive, even by a process still running with the old list; resumed if it is
 * added back within REMOVED_ENDPOINT_GRACE_MS (24 h, the retry window); given up with the reason (status `failed`)
 * after that, and then pruned with the other settled deliveries. Real PostgreSQL; the deliveries over HTTP are in
 * worker/webhooks.test.ts.
 */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

let n = 0;
/** Endpoint URLs of their own for each test (the database is shared by the file's tests). */
function endpoints(): [string, string] {
  n++;
  return [`https://kept-${n}.example.org/hook`, `https://removed-${n}.example.org/hook`];
}

async function event(label: string): Promise<string> {
  const id = await enqueueWebhookEvent(t.db, "webhook.test", { label });
  if (!id) throw new Error("no active endpoint: nothing was written");
  return id;
}

type DeliveryRow = { event_id: string; status: string; attempts: number; last_error: string | null };

async function deliveriesTo(endpoint: string): Promise<DeliveryRow[]> {
  const rows = await t.db.execute<DeliveryRow>(
    sql`SELECT d.event_id, d.status::text AS status, d.attempts, d.last_error FROM webhook_deliveries d WHERE d.endpoint = ${endpoint} ORDER BY d.id`,
  );
  return [...rows];
}

/** Claims every due delivery of `endpoint` (as a dispatcher does, leased for 30 s). */
const claimAll = (endpoint: string) => claimDueDeliveries(t.db, { endpoint, limit: 100, leaseMs: 30_000 });

/** Claims every due delivery of `endpoint` and settles each as `outcome` (a failure is retried at once). */
async function attemptAll(endpoint: string, outcome: "delivered" | "failed"): Promise<number> {
  const claimed = await claimAll(endpoint);
  for (const d of claimed) {
    const delivered = outcome === "delivered";
    await settleDelivery(t.db, {
      id: d.id,
      attempts: d.attempts,
      delivered,
      statusCode: delivered ? 200 : 500,
      error: delivered ? null : "answered 500",
      retryInMs: delivered ? undefined : -1_000,
    });
  }
  return claimed.length;
}

async function eventExists(id: string): Promise<boolean> {
  const rows = await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE id = ${id}`);
  return rows[0]!.n === 1;
}

/** As if the endpoint had been removed from WEBHOOK_URLS longer ago than the grace period. */
async function removedLongAgo(endpoint: string): Promise<void> {
  await t.db.execute(
    sql`UPDATE webhook_endpoints SET updated_at = now() - make_interval(secs => ${REMOVED_ENDPOINT_GRACE_MS / 1000 + 3600}) WHERE url = ${endpoint}`,
  );
}

describe("an endpoint removed from WEBHOOK_URLS", () => {
  it("has its waiting deliveries (retrying or never tried) held, none of them claimed, and given up with the reason once removed for 24 h", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const retried = await event("retried");
    expect(await attemptAll(kept, "delivered")).toBe(1);
    expect(await attemptAll(removed, "failed")).toBe(1);
    const untried = await event("never tried");

    await syncWebhookEndpoints(t.db, [kept]);
    expect(await claimAll(removed)).toEqual([]);
    // Within the grace period nothing is given up (a removal by mistake loses nothing).
    expect(await giveUpRemovedEndpointDeliveries(t.db)).toBe(0);
    expect((await deliveriesTo(removed)).map((d) => [d.event_id, d.status])).toEqual([
      [retried, "pending"],
      [untried, "pending"],
    ]);

    await removedLongAgo(removed);
    expect(await giveUpRemovedEndpointDeliveries(t.db)).toBe(2);
    expect(await deliveriesTo(removed)).toEqual([
      { event_id: retried, status: "failed", attempts: 1, last_error: ENDPOINT_REMOVED_ERROR },
      { event_id: untried, status: "failed", attempts: 0, last_error: ENDPOINT_REMOVED_ERROR },
    ]);
    expect(await claimAll(removed)).toEqual([]);
    // The endpoint that stays is not touched.
    expect((await deliveriesTo(kept)).map((d) => [d.event_id, d.status])).toEqual([
      [retried, "delivered"],
      [untried, "pending"],
    ]);
    expect(await attemptAll(kept, "delivered")).toBe(1);
  });

  it("claims nothing for an inactive endpoint, even for a process still delivering with the old list", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const late = await event("committed just after the removal");
    // As if the event's transaction had seen the endpoint active and committed after another process removed it.
    await t.db.execute(sql`UPDATE webhook_endpoints SET active = false WHERE url = ${removed}`);
    expect(await claimAll(removed)).toEqual([]);
    expect(await deliveriesTo(removed)).toEqual([{ event_id: late, status: "pending", attempts: 0, last_error: null }]);
  });

  it("records an attempt in flight when its delivery was given up as delivered if it was, and leaves a failed one given up, never pending again", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const ok = await event("answered 200");
    const bad = await event("answered 500");
    const inFlight = await claimAll(removed);
    expect(inFlight.map((d) => d.eventId)).toEqual([ok, bad]);

    await syncWebhookEndpoints(t.db, [kept]);
    await removedLongAgo(removed);
    expect(await giveUpRemovedEndpointDeliveries(t.db)).toBe(2);
    const [first, second] = inFlight;
    await settleDelivery(t.db, { id: first!.id, attempts: first!.attempts, delivered: true, statusCode: 200, error: null, retryInMs: undefined });
    await settleDelivery(t.db, {
      id: second!.id,
      attempts: second!.attempts,
      delivered: false,
      statusCode: 500,
      error: "answered 500",
      retryInMs: -1_000,
    });

    expect(await deliveriesTo(removed)).toEqual([
      { event_id: ok, status: "delivered", attempts: 1, last_error: null },
      { event_id: bad, status: "failed", attempts: 1, last_error: ENDPOINT_REMOVED_ERROR },
    ]);
  });

  it("no longer holds back the retention prune once its deliveries are given up: the event is pruned with its deliveries", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const id = await event("prune me");
    await attemptAll(kept, "delivered");
    await attemptAll(removed, "failed");
    // Everything written so far counts as older than the retention here (0 ms).
    await pruneWebhookEvents(t.db, 0);
    expect(await eventExists(id)).toBe(true);

    await syncWebhookEndpoints(t.db, [kept]);
    await removedLongAgo(removed);
    await giveUpRemovedEndpointDeliveries(t.db);
    await pruneWebhookEvents(t.db, 0);
    expect(await eventExists(id)).toBe(false);
    expect(await deliveriesTo(kept)).toEqual([]);
    expect(await deliveriesTo(removed)).toEqual([]);
  });

  it("prunes a backlog in batches, all of it, and none still waiting for a delivery", async () => {
    const [kept] = endpoints();
    await syncWebhookEndpoints(t.db, [kept]);
    const settled = await Promise.all(Array.from({ length: 7 }, (_, i) => event(`backlog ${i}`)));
    await attemptAll(kept, "delivered");
    const waiting = await event("still waiting");
    // Batches of 2: four statements for the seven settled, whatever else the file's tests left.
    const pruned = await pruneWebhookEvents(t.db, 0, 2);
    expect(pruned).toBeGreaterThanOrEqual(7);
    for (const id of settled) expect(await eventExists(id)).toBe(false);
    expect(await eventExists(waiting)).toBe(true);
    expect(await pruneWebhookEvents(t.db, 0, 2)).toBe(0);
  });

  it("prunes in batches that walk on past events still held, also among events of one transaction (one created_at)", async () => {
    const [kept] = endpoints();
    await syncWebhookEndpoints(t.db, [kept]);
    const ids = await t.db.transaction(async (tx) => {
      const written: string[] = [];
      for (let i = 0; i < 9; i++) written.push((await enqueueWebhookEvent(tx, "webhook.test", { label: `one transaction ${i}` }))!);
      return written;
    });
    const held = ids.filter((_, i) => i % 3 === 0);
    const settled = ids.filter((_, i) => i % 3 !== 0);
    await t.db.execute(sql`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now()
      WHERE event_id IN (${sql.join(
        settled.map((id) => sql`${id}::uuid`),
        sql`, `,
      )})`);
    // Batches of 2 that end inside the transaction's events: none settled is left, none held is taken.
    await pruneWebhookEvents(t.db, 0, 2);
    for (const id of settled) expect(await eventExists(id), id).toBe(false);
    for (const id of held) expect(await eventExists(id), id).toBe(true);
    await t.db.execute(sql`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now() WHERE endpoint = ${kept}`);
    await pruneWebhookEvents(t.db, 0, 2);
    for (const id of held) expect(await eventExists(id), id).toBe(false);
  });

  it("added back within 24 h, receives what was held for it and the new events; added back later, only the new ones", async () => {
    const [kept, soon] = endpoints();
    const late = endpoints()[1];
    await syncWebhookEndpoints(t.db, [kept, soon, late]);
    const beforeRemoval = await event("before the removal");
    await syncWebhookEndpoints(t.db, [kept]);
    await event("while removed");
    await removedLongAgo(late);
    await giveUpRemovedEndpointDeliveries(t.db);

    await syncWebhookEndpoints(t.db, [kept, soon, late]);
    const afterReAdd = await event("after the re-add");

    const claimedSoon = await claimAll(soon);
    expect(claimedSoon.map((d) => d.eventId)).toEqual([beforeRemoval, afterReAdd]);
    const claimedLate = await claimAll(late);
    expect(claimedLate.map((d) => d.eventId)).toEqual([afterReAdd]);
    expect((await deliveriesTo(late)).map((d) => [d.event_id, d.status, d.last_error])).toEqual([
      [beforeRemoval, "failed", ENDPOINT_REMOVED_ERROR],
      [afterReAdd, "pending", null],
    ]);
  });
});

describe("the first registration of endpoints", () => {
  it("waits for a worker's sync of its list committing at the same time, and then adds nothing the worker's list lacks", async () => {
    // Its own database: the table must be empty, as on a service's very first start.
    const fresh = await createTestDatabase();
    try {
      const workerUrl = "https://worker-list.example.org/hook";
      const webOnlyUrl = "https://web-server-only.example.org/hook";
      let registration: Promise<"done"> | undefined;
      await fresh.db.transaction(async (tx) => {
        // The worker's start-up sync, not yet committed, while a web server (another host) registers its own list.
        await syncWebhookEndpoints(tx, [workerUrl]);
        registration = registerWebhookEndpoints(fresh.db, [workerUrl, webOnlyUrl]).then(() => "done" as const);
        // Commit only once the registration has either finished (the race: it saw an empty table) or waits for the lock.
        for (;;) {
          const waiting = await fresh.db.execute<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          );
          if (waiting[0]!.n > 0) break;
          if ((await Promise.race([registration, new Promise((resolve) => setTimeout(resolve, 20, "running"))])) === "done") break;
        }
      });
      await registration;
      const rows = await fresh.db.execute<{ url: string; active: boolean }>(sql`SELECT url, active FROM webhook_endpoints ORDER BY url`);
      expect([...rows]).toEqual([{ url: workerUrl, active: true }]);
    } finally {
      await fresh.drop();
    }
  });
});
