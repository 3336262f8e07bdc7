import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import type { Abi } from "viem";
import { compileTestContract } from "@/contracts/test-helpers";
import type { AdminSession } from "@/db/schema";
import { pauseSponsorships, resumeSponsorships } from "@/lib/admin/controls";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { blockWallet } from "@/lib/sponsorship/blocks";
import { getSponsorshipRequest } from "@/lib/sponsorship/reads";
import { startWebhookReceiver, type WebhookReceiver } from "@/test/webhook-receiver";
import type { RunningWorker } from "./worker";
import { startWorker } from "./worker";
import { createLogger } from "@/lib/log";
import {
  createRequest,
  readRequest,
  spawnWorker,
  stopSpawned,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * decisions.md "Operators are told", webhooks (issue 12 items 1 and 2): every request transition reaches every
 * endpoint through the transactional outbox, signed as the Standard Webhooks specification (verified here with the
 * specification's own `standardwebhooks` verifier), in order per request, retried with the same webhook-id, one dead
 * endpoint delaying no other, nothing lost to a SIGKILL; alerts once per episode. Real PostgreSQL, anvil and HTTP.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
const refusing = compileTestContract("RefusingWallet.sol", "RefusingWallet");
const session = { id: "00000000-0000-4000-8000-00000000ad02" } as AdminSession;
const verifier = new Webhook(SECRET);
const quiet = createLogger({ test: "webhooks" });

let fx: PipelineFixture;
const receivers: WebhookReceiver[] = [];
const workers: RunningWorker[] = [];
const spawned: SpawnedWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  for (const w of spawned.splice(0)) await stopSpawned(w);
  for (const r of receivers.splice(0)) await r.close();
  // Each test registers its own endpoints at start; earlier ones stop receiving.
  await fx.database.db.execute(sql`UPDATE webhook_endpoints SET active = false WHERE active`);
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver();
  receivers.push(r);
  return r;
}

async function worker(urls: string[], options: Parameters<typeof startWorker>[0]["webhooks"] = {}, env: Record<string, string> = {}): Promise<RunningWorker> {
  const w = await startWorker({
    config: fx.config({ WEBHOOK_URLS: urls.join(","), WEBHOOK_SECRET: SECRET, ...env }),
    log: quiet,
    settings: { heartbeatMs: 500 },
    webhooks: { dispatcher: { pollMs: 50, baseDelayMs: 50, maxDelayMs: 200 }, alertIntervalMs: 100, ...options },
  });
  workers.push(w);
  return w;
}

/** The events a receiver got for one request, verified with the secret (throws on a bad signature). */
function eventsOf(r: WebhookReceiver, requestId: string) {
  return r
    .ofType()
    .filter((e) => e.json.data.id === requestId)
    .map((e) => {
      verifier.verify(e.body, e.headers);
      return e;
    });
}

const TRANSITIONS = ["sponsorship.approved", "sponsorship.relayed", "sponsorship.completed"];

describe("webhooks of request transitions", () => {
  it("delivers approved, relayed and completed of a completed request to every endpoint, verified by standardwebhooks, in order, without ipAddress or userAgent", async () => {
    const a = await receiver();
    const b = await receiver();
    await worker([a.url, b.url]);
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
    const record = await getSponsorshipRequest(fx.database.db, id, "service");
    for (const r of [a, b]) {
      const events = await waitFor("three events at the endpoint", async () => (eventsOf(r, id).length >= 3 ? eventsOf(r, id) : undefined));
      expect(events.map((e) => e.json.type)).toEqual(TRANSITIONS);
      for (const e of events) {
        expect(Object.keys(e.json).sort()).toEqual(["data", "timestamp", "type"]);
        expect(e.json.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        expect(e.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
        expect(e.headers["webhook-timestamp"]).toMatch(/^\d+$/);
        expect(e.json.data).not.toHaveProperty("ipAddress");
        expect(e.json.data).not.toHaveProperty("userAgent");
      }
      expect(events.map((e) => e.json.data.status)).toEqual(["approved", "relayed", "completed"]);
      // The completed event's data is GET /sponsorship/:id's record, minus the requester's IP and User-Agent.
      const { ipAddress: _ip, userAgent: _ua, ...expected } = record;
      expect(events[2]!.json.data).toEqual(expected);
    }
    // A tampered body fails the verifier (the check above is real).
    const first = eventsOf(a, id)[0]!;
    expect(() => verifier.verify(first.body.replace("approved", "rejected"), first.headers)).toThrow();
  });

  it("sends as data of every transition GET /sponsorship/:id's record as it stood then (approved, relayed, completed, rejected, failed), minus ipAddress and userAgent", async () => {
    const r = await receiver();
    // Three requests: one completes, one is rejected (its wallet blocked before review), one fails (its wallet starts
    // refusing payment after review, while sponsorships are paused: failed on its first attempt, no retry can cure it).
    const done = await createRequest(fx);
    const blocked = await createRequest(fx);
    await blockWallet(fx.database.db, { walletAddress: blocked.wallet, reason: "abuse", actor: "admin:test" });
    const deployed = await fx.clients.waitForTransactionReceipt({
      hash: await fx.clients.walletClient(LOCAL_DEPLOYER_KEY).deployContract({ abi: refusing.abi, bytecode: refusing.bytecode, args: [false] }),
    });
    const refusingWallet = deployed.contractAddress!.toLowerCase() as `0x${string}`;
    const refused = await createRequest(fx, refusingWallet);
    await pauseSponsorships(fx.database.db, { session, ipAddress: null }, { reason: "test: hold relays" });
    try {
      await worker([r.url]);
      await waitFor("the refusing wallet's request approved", async () => (await readRequest(fx, refused.id)).status === "approved");
      await fx.clients.waitForTransactionReceipt({
        hash: await fx.clients
          .walletClient(LOCAL_DEPLOYER_KEY)
          .writeContract({ address: refusingWallet, abi: refusing.abi as Abi, functionName: "setRefusing", args: [true] }),
      });
    } finally {
      await resumeSponsorships(fx.database.db, { session, ipAddress: null });
    }

    const expected = { [done.id]: ["approved", "relayed", "completed"], [blocked.id]: ["rejected"], [refused.id]: ["approved", "relayed", "failed"] };
    for (const [id, statuses] of Object.entries(expected)) {
      const events = await waitFor(`${statuses.length} events of ${id}`, async () => (eventsOf(r, id).length >= statuses.length ? eventsOf(r, id) : undefined));
      expect(events.map((e) => e.json.type)).toEqual(statuses.map((s) => `sponsorship.${s}`));
      // Terminal now: GET's record no longer changes. The terminal event's data is that record; an earlier one's is the
      // record as it stood at its transition: its status, the later transitions' timestamps still null, and the relay
      // transactions of that moment (none when approved; when relayed, the attempt just stored, before its broadcast).
      const { ipAddress: _ip, userAgent: _ua, ...record } = (await getSponsorshipRequest(fx.database.db, id, "service"))!;
      const last = events.at(-1)!;
      expect(last.json.data, `${last.json.type} of ${id}`).toEqual(record);
      for (const e of events.slice(0, -1)) {
        const status = e.json.data.status as string;
        const relays =
          status === "approved"
            ? []
            : record.relayTransactions
                .slice(0, 1)
                .map((t) => ({ ...t, status: "queued", submittedAt: null, confirmedAt: null, failedAt: null, failureReason: null }));
        expect(e.json.data, `${e.json.type} of ${id}`).toEqual({ ...record, status, completedAt: null, failedAt: null, relayTransactions: relays });
      }
    }
  });

  it("retries a receiver that answers 500 three times, then 200: delivered on the fourth try with the same webhook-id", async () => {
    const r = await receiver();
    r.respond(({ nthOfId }) => (nthOfId <= 3 ? 500 : 200));
    await worker([r.url]);
    const { id } = await createRequest(fx);
    const events = await waitFor("the completed event delivered", async () => {
      const got = eventsOf(r, id);
      return got.filter((e) => e.json.type === "sponsorship.completed").length >= 4 ? got : undefined;
    });
    for (const type of TRANSITIONS) {
      const tries = events.filter((e) => e.json.type === type);
      expect(tries).toHaveLength(4);
      expect(new Set(tries.map((e) => e.headers["webhook-id"])).size).toBe(1);
    }
    // In order: no attempt of a later event before the earlier one was delivered.
    const order = events.map((e) => e.json.type);
    expect(order.lastIndexOf("sponsorship.approved")).toBeLessThan(order.indexOf("sponsorship.relayed"));
    expect(order.lastIndexOf("sponsorship.relayed")).toBeLessThan(order.indexOf("sponsorship.completed"));
    // The receiver answered before the dispatcher recorded it: wait for the record.
    const rows = await waitFor("the deliveries recorded", async () => {
      const found = await fx.database.db.execute<{ type: string; status: string; attempts: number; last_status_code: number }>(sql`
        SELECT e.type, d.status, d.attempts, d.last_status_code FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
        WHERE e.sponsorship_request_id = ${id} AND d.endpoint = ${r.url} ORDER BY e.seq`);
      return found.every((x) => x.status !== "pending") ? found : undefined;
    });
    expect(rows.map((x) => [x.type, x.status, x.attempts, x.last_status_code])).toEqual(TRANSITIONS.map((t) => [t, "delivered", 4, 200]));
  });

  it("does not let a dead endpoint delay another: one that never answers holds only its own deliveries", async () => {
    const dead = await receiver();
    dead.respond(() => "hang");
    const alive = await receiver();
    // The dead endpoint's attempt outlasts the test: it is still in flight when the other has everything.
    await worker([dead.url, alive.url], { dispatcher: { pollMs: 50, baseDelayMs: 50, maxDelayMs: 200, timeoutMs: 120_000 } });
    const { id } = await createRequest(fx);
    const events = await waitFor("all three events at the live endpoint", async () => (eventsOf(alive, id).length >= 3 ? eventsOf(alive, id) : undefined));
    expect(events.map((e) => e.json.type)).toEqual(TRANSITIONS);
    // The dead one got the first event (its attempt hangs) and, keeping the request's order, nothing after it. Its
    // attempt may begin after the live endpoint had everything (a loaded machine): waited for, not assumed.
    const dying = await waitFor("the dead endpoint's first attempt", async () => (eventsOf(dead, id).length >= 1 ? eventsOf(dead, id) : undefined));
    expect(dying.map((e) => e.json.type)).toEqual(["sponsorship.approved"]);
  });

  it("loses nothing when the worker is SIGKILLed between the status change and the delivery: delivered after the restart", async () => {
    const r = await receiver();
    r.respond(() => 503); // nothing is delivered while the first worker lives
    const env = { WEBHOOK_URLS: r.url, WEBHOOK_SECRET: SECRET };
    const { id } = await createRequest(fx);
    const crashing = spawnWorker(fx, { ...env, WORKER_TEST_CRASH_AFTER_BROADCASTS: "1" });
    spawned.push(crashing);
    expect((await crashing.exited).signal, crashing.output()).toBe("SIGKILL");
    const before = await fx.database.db.execute<{ type: string; status: string }>(sql`
      SELECT e.type, d.status FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.sponsorship_request_id = ${id} ORDER BY e.seq`);
    expect(before.map((x) => x.type)).toContain("sponsorship.approved");
    expect(before.every((x) => x.status === "pending")).toBe(true);
    expect(r.received.every((x) => x.status === 503)).toBe(true);

    r.respond(() => 200);
    const restarted = spawnWorker(fx, env);
    spawned.push(restarted);
    const delivered = await waitFor(
      "every event delivered after the restart",
      async () => {
        const ok = eventsOf(r, id).filter((_, i, all) => r.received.find((x) => x.body === all[i]!.body && x.status === 200));
        const types = [...new Set(ok.map((e) => e.json.type))];
        return types.length === 3 ? types : undefined;
      },
      90_000,
      250,
    );
    expect(delivered).toEqual(TRANSITIONS);
  });

  it("sends each event once when two workers deliver to the same endpoint (claims are FOR UPDATE SKIP LOCKED)", async () => {
    const r = await receiver();
    await worker([r.url]);
    await worker([r.url]);
    const ids = await Promise.all(Array.from({ length: 6 }, async () => (await createRequest(fx)).id));
    await waitFor("every event of every request delivered", async () => ids.every((id) => eventsOf(r, id).length >= 3));
    await waitFor("no delivery left pending", async () => {
      const rows = await fx.database.db.execute<{ n: number }>(
        sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint = ${r.url} AND status = 'pending'`,
      );
      return rows[0]!.n === 0;
    });
    for (const id of ids) expect(eventsOf(r, id).map((e) => e.json.type)).toEqual(TRANSITIONS);
    const ids200 = r.received.map((x) => x.headers["webhook-id"]);
    expect(new Set(ids200).size).toBe(ids200.length);
  });

  it("holds what was waiting for an endpoint removed from WEBHOOK_URLS (nothing sent while it is out), and delivers it once the endpoint is added back within 24 h", async () => {
    const kept = await receiver();
    const removed = await receiver();
    removed.respond(() => 500);
    const before = await worker([kept.url, removed.url]);
    const { id: old } = await createRequest(fx);
    await waitFor("the old request's events at the kept endpoint", async () => eventsOf(kept, old).length >= 3);
    await waitFor("the failing endpoint retried", async () => eventsOf(removed, old).length >= 2);
    const statusesOfOld = async () => {
      const rows = await fx.database.db.execute<{ type: string; status: string }>(sql`
        SELECT e.type, d.status::text AS status FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
        WHERE d.endpoint = ${removed.url} AND e.sponsorship_request_id = ${old} ORDER BY e.seq`);
      return rows.map((d) => [d.type, d.status]);
    };

    // The operator removes it from WEBHOOK_URLS and restarts the worker: what waited for it is held, not given up.
    await before.stop();
    workers.splice(workers.indexOf(before), 1);
    await worker([kept.url]);
    expect(await statusesOfOld()).toEqual(TRANSITIONS.map((type) => [type, "pending"]));
    const attemptsOfOld = eventsOf(removed, old).length;
    const { id: meanwhile } = await createRequest(fx);
    await waitFor("the request made meanwhile at the kept endpoint", async () => eventsOf(kept, meanwhile).length >= 3);
    expect(eventsOf(removed, old)).toHaveLength(attemptsOfOld);

    // Added back (and answering now) within the day: what was held is delivered, then the new events; the events
    // written while it was out of the list were never its own.
    removed.respond(() => 200);
    for (const w of workers.splice(0)) await w.stop();
    await worker([kept.url, removed.url]);
    await waitFor("the held deliveries delivered", async () => ((await statusesOfOld()).every(([, status]) => status === "delivered") ? true : undefined));
    const { id: fresh } = await createRequest(fx);
    const events = await waitFor("the new request's events at the endpoint added back", async () =>
      eventsOf(removed, fresh).length >= 3 ? eventsOf(removed, fresh) : undefined,
    );
    expect(events.map((e) => e.json.type)).toEqual(TRANSITIONS);
    expect(eventsOf(removed, meanwhile)).toEqual([]);
  });

  it("writes nothing to the outbox while no endpoint is configured (the cost of a transition stays one index probe)", async () => {
    await worker([], {}, { WEBHOOK_URLS: "", WEBHOOK_SECRET: "" });
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
    const rows = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE sponsorship_request_id = ${id}`);
    expect(rows[0]!.n).toBe(0);
  });
});
