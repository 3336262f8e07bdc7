import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import {
  ENDPOINT_REMOVED_ERROR,
  claimDueDeliveries,
  enqueueWebhookEvent,
  giveUpRemovedEndpointDeliveries,
  pruneWebhookEvents,
  settleDelivery,
  syncWebhookEndpoints,
} from "./webhooks";

/**
 * Endpoints removed from WEBHOOK_URLS (docs/webhooks.md "Configuration"): the deliveries still waiting for one are
 * given up with the reason (status `failed`), never claimed again, even by a process still running with the old list,
 * and pruned with the other settled deliveries; an endpoint added back receives only the events written after that.
 * Real PostgreSQL; the deliveries over HTTP are in worker/webhooks.test.ts.
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

/** Claims every due delivery of `endpoint` and settles each as `outcome` (a failure is retried at once). */
async function attemptAll(endpoint: string, outcome: "delivered" | "failed"): Promise<number> {
  const claimed = await claimDueDeliveries(t.db, { endpoint, limit: 100, leaseMs: 30_000 });
  for (const d of claimed) {
    const delivered = outcome === "delivered";
    await settleDelivery(t.db, {
      id: d.id,
      attempts: d.attempts,
      delivered,
      statusCode: delivered ? 200 : 500,
      error: delivered ? null : "answered 500",
      retryAt: delivered ? undefined : new Date(Date.now() - 1_000),
    });
  }
  return claimed.length;
}

async function eventExists(id: string): Promise<boolean> {
  const rows = await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE id = ${id}`);
  return rows[0]!.n === 1;
}

describe("an endpoint removed from WEBHOOK_URLS", () => {
  it("has its waiting deliveries (retrying or never tried) given up with the reason, and none of them claimed any more", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const retried = await event("retried");
    expect(await attemptAll(kept, "delivered")).toBe(1);
    expect(await attemptAll(removed, "failed")).toBe(1);
    const untried = await event("never tried");

    await syncWebhookEndpoints(t.db, [kept]);

    expect(await deliveriesTo(removed)).toEqual([
      { event_id: retried, status: "failed", attempts: 1, last_error: ENDPOINT_REMOVED_ERROR },
      { event_id: untried, status: "failed", attempts: 0, last_error: ENDPOINT_REMOVED_ERROR },
    ]);
    expect(await claimDueDeliveries(t.db, { endpoint: removed, limit: 100, leaseMs: 30_000 })).toEqual([]);
    // The endpoint that stays is not touched.
    expect((await deliveriesTo(kept)).map((d) => [d.event_id, d.status])).toEqual([
      [retried, "delivered"],
      [untried, "pending"],
    ]);
    expect(await attemptAll(kept, "delivered")).toBe(1);
  });

  it("claims nothing for an inactive endpoint, even for a process still delivering with the old list, and the worker's pass gives up what is left", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const late = await event("committed just after the removal");
    // As if the event's transaction had seen the endpoint active and committed after another process removed it.
    await t.db.execute(sql`UPDATE webhook_endpoints SET active = false WHERE url = ${removed}`);

    expect(await claimDueDeliveries(t.db, { endpoint: removed, limit: 100, leaseMs: 30_000 })).toEqual([]);
    expect(await giveUpRemovedEndpointDeliveries(t.db)).toBeGreaterThanOrEqual(1);
    expect(await deliveriesTo(removed)).toEqual([{ event_id: late, status: "failed", attempts: 0, last_error: ENDPOINT_REMOVED_ERROR }]);
    expect(await giveUpRemovedEndpointDeliveries(t.db)).toBe(0);
  });

  it("records an attempt in flight when its endpoint was removed as delivered if it was, and leaves a failed one given up, never pending again", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const ok = await event("answered 200");
    const bad = await event("answered 500");
    const inFlight = await claimDueDeliveries(t.db, { endpoint: removed, limit: 100, leaseMs: 30_000 });
    expect(inFlight.map((d) => d.eventId)).toEqual([ok, bad]);

    await syncWebhookEndpoints(t.db, [kept]);
    const [first, second] = inFlight;
    await settleDelivery(t.db, { id: first!.id, attempts: first!.attempts, delivered: true, statusCode: 200, error: null, retryAt: undefined });
    await settleDelivery(t.db, {
      id: second!.id,
      attempts: second!.attempts,
      delivered: false,
      statusCode: 500,
      error: "answered 500",
      retryAt: new Date(Date.now() - 1_000),
    });

    expect(await deliveriesTo(removed)).toEqual([
      { event_id: ok, status: "delivered", attempts: 1, last_error: null },
      { event_id: bad, status: "failed", attempts: 1, last_error: ENDPOINT_REMOVED_ERROR },
    ]);
  });

  it("no longer holds back the retention prune: an event whose only unsettled delivery was to it is pruned with its deliveries", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const id = await event("prune me");
    await attemptAll(kept, "delivered");
    await attemptAll(removed, "failed");
    // Everything written so far counts as older than the retention here (0 ms).
    await pruneWebhookEvents(t.db, 0);
    expect(await eventExists(id)).toBe(true);

    await syncWebhookEndpoints(t.db, [kept]);
    await pruneWebhookEvents(t.db, 0);
    expect(await eventExists(id)).toBe(false);
    expect(await deliveriesTo(kept)).toEqual([]);
    expect(await deliveriesTo(removed)).toEqual([]);
  });

  it("receives only the events written after it was added back, also when a build before this one left deliveries waiting for it", async () => {
    const [kept, removed] = endpoints();
    await syncWebhookEndpoints(t.db, [kept, removed]);
    const beforeRemoval = await event("before the removal");
    await syncWebhookEndpoints(t.db, [kept]);
    await event("while removed");
    // A build before this one deactivated endpoints and left their deliveries pending.
    const stale = endpoints()[1];
    await syncWebhookEndpoints(t.db, [kept, stale]);
    const leftBehind = await event("left pending by an older build");
    await t.db.execute(sql`UPDATE webhook_endpoints SET active = false WHERE url = ${stale}`);

    await syncWebhookEndpoints(t.db, [kept, removed, stale]);
    const afterReAdd = await event("after the re-add");

    const claimedRemoved = await claimDueDeliveries(t.db, { endpoint: removed, limit: 100, leaseMs: 30_000 });
    expect(claimedRemoved.map((d) => d.eventId)).toEqual([afterReAdd]);
    const claimedStale = await claimDueDeliveries(t.db, { endpoint: stale, limit: 100, leaseMs: 30_000 });
    expect(claimedStale.map((d) => d.eventId)).toEqual([afterReAdd]);
    expect((await deliveriesTo(removed)).map((d) => [d.event_id, d.status, d.last_error])).toEqual([
      [beforeRemoval, "failed", ENDPOINT_REMOVED_ERROR],
      [afterReAdd, "pending", null],
    ]);
    expect((await deliveriesTo(stale)).map((d) => [d.event_id, d.status, d.last_error])).toEqual([
      [leftBehind, "failed", ENDPOINT_REMOVED_ERROR],
      [afterReAdd, "pending", null],
    ]);
  });
});
