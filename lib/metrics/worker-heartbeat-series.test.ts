import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Registry } from "prom-client";
import { upsertHeartbeat } from "@/db/queries/heartbeats";
import { GONE_WORKER_AFTER_SECONDS } from "@/db/queries/heartbeats";
import { workerHeartbeats } from "@/db/schema";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { createMetricsRegistry } from "./registry";
import { registerServiceMetrics } from "./service";

/**
 * sponsorship_worker_heartbeat_age_seconds read from a real worker_heartbeats table. A crashed worker leaves its row
 * behind and its replacement beats under a new id: the dead row must not stay a stale series (it kept
 * SponsorshipWorkerStale firing for up to an hour, and each restart added a series), while the newest row is always
 * reported so that "no worker lives" stays visible.
 */

const METRIC = "sponsorship_worker_heartbeat_age_seconds";

async function heartbeatSeries(registry: Registry): Promise<Record<string, number>> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === METRIC);
  return Object.fromEntries((metric?.values ?? []).map((s) => [String(s.labels.worker), s.value]));
}

function scrapeOf(testDb: TestDatabase): Registry {
  const registry = createMetricsRegistry("web", { defaultMetrics: false });
  registerServiceMetrics(registry, { sources: () => ({ db: testDb.db }), cacheMs: 0 });
  return registry;
}

/** A row as a worker left it when it died `silentSeconds` ago (its last beat, never deleted). */
async function leaveDeadRow(testDb: TestDatabase, workerId: string, silentSeconds: number): Promise<void> {
  const lastBeatAt = new Date(Date.now() - silentSeconds * 1000);
  await testDb.db.insert(workerHeartbeats).values({ workerId, hostname: "host", pid: 100, startedAt: lastBeatAt, lastBeatAt });
}

describe("worker heartbeat series", () => {
  let testDb: TestDatabase;
  // Each test on a database of its own (heartbeat rows are the whole point).
  beforeEach(async () => {
    testDb = await createTestDatabase();
  });
  afterEach(async () => {
    await testDb?.drop();
  });

  it("drops a crashed worker's row once it has been silent for minutes while its replacement beats", async () => {
    const gone = GONE_WORKER_AFTER_SECONDS + 15 * 60;
    await leaveDeadRow(testDb, "host:100:crashed", gone);
    await leaveDeadRow(testDb, "host:101:just-died", 60);
    await upsertHeartbeat(testDb.db, { workerId: "host:102:live", hostname: "host", pid: 102, startedAt: new Date(), details: {} });

    const series = await heartbeatSeries(scrapeOf(testDb));
    expect(Object.keys(series).sort()).toEqual(["host:101:just-died", "host:102:live"]);
    expect(series["host:102:live"]).toBeLessThan(5);
    // Recently silent: still reported (SponsorshipWorkerSilent names it).
    expect(series["host:101:just-died"]).toBeGreaterThanOrEqual(59);
    // The row itself stays for the dashboard and lease take-over; only the series leaves it out.
    expect((await testDb.db.select().from(workerHeartbeats)).map((r) => r.workerId).sort()).toEqual([
      "host:100:crashed",
      "host:101:just-died",
      "host:102:live",
    ]);
  });

  it("keeps the newest heartbeat, however old, while no worker beats, and no older one", async () => {
    const gone = GONE_WORKER_AFTER_SECONDS + 15 * 60;
    await leaveDeadRow(testDb, "host:100:first", gone + 20 * 60);
    await leaveDeadRow(testDb, "host:101:last", gone);

    const series = await heartbeatSeries(scrapeOf(testDb));
    expect(Object.keys(series)).toEqual(["host:101:last"]);
    // min() of the series is the freshest age: SponsorshipWorkerStale keeps firing, SponsorshipNoWorker need not.
    expect(series["host:101:last"]).toBeGreaterThanOrEqual(gone - 1);
  });
});
