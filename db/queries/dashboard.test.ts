import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { relayerAccounts, relayTransactions, sponsorshipRequests, wallets, workerHeartbeats } from "@/db/schema";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import {
  classifyRequestSearch,
  countRequestsByStatus,
  decodeRequestCursor,
  encodeRequestCursor,
  getCompletionLatency,
  getOutcomeSeries,
  getQueueDepth,
  getRequestDetail,
  listRelayerAccounts,
  listRequests,
  listWorkerHeartbeats,
} from "./dashboard";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;

async function newWallet() {
  const [wallet] = await t.db
    .insert(wallets)
    .values({ walletAddress: hex(20) })
    .returning();
  return wallet!;
}

async function newRequest(requestedAt: Date, walletAddress?: string) {
  const wallet = walletAddress ? (await t.db.select().from(wallets).where(eq(wallets.walletAddress, walletAddress)))[0]! : await newWallet();
  const [request] = await t.db
    .insert(sponsorshipRequests)
    .values({ walletId: wallet.id, walletAddress: wallet.walletAddress, ipAddress: "127.0.0.1", requestedAt })
    .returning();
  return request!;
}

/** Moves a request along the state machine the way the worker does (the trigger allows nothing else). */
async function advance(id: string, to: "approved" | "relayed" | "completed" | "failed" | "rejected", at: Date) {
  const set =
    to === "approved"
      ? { approvedAt: at, eligibilityReason: "eligible" as const }
      : to === "relayed"
        ? { relayedAt: at }
        : to === "completed"
          ? { completedAt: at }
          : to === "failed"
            ? { failedAt: at, failureReason: "five attempts failed" }
            : { rejectedAt: at, eligibilityReason: "wallet_blocked" as const };
  await t.db
    .update(sponsorshipRequests)
    .set({ status: to, statusActor: "worker:test", statusReason: to, ...set })
    .where(eq(sponsorshipRequests.id, id));
}

async function complete(requestedAt: Date, durationMs: number, hash = hex(32)) {
  const request = await newRequest(requestedAt);
  const done = new Date(requestedAt.getTime() + durationMs);
  await advance(request.id, "approved", requestedAt);
  await t.db.insert(relayTransactions).values({
    sponsorshipRequestId: request.id,
    relayAttempt: 1,
    status: "submitted",
    transactionHash: hash,
    relayerAddress: hex(20),
    nonce: 0,
    submittedAt: requestedAt,
  });
  await advance(request.id, "relayed", requestedAt);
  await advance(request.id, "completed", done);
  return { request, hash };
}

describe("dashboard queries", () => {
  // Everything in this block lives in one hour far in the past, so rows of other tests do not disturb it.
  const base = new Date("2030-03-01T10:00:00.000Z");

  it("counts requests by status, with zero for statuses that have none", async () => {
    const before = await countRequestsByStatus(t.db);
    const r = await newRequest(new Date());
    await advance(r.id, "rejected", new Date());
    const after = await countRequestsByStatus(t.db);
    expect(after.rejected).toBe(before.rejected + 1);
    expect(Object.keys(after).sort()).toEqual(["approved", "completed", "failed", "pending", "rejected", "relayed"]);
  });

  it("computes median and p95 of request-to-completed over completed requests", async () => {
    const since = new Date(base.getTime());
    // 20 requests completing in 1..20 seconds.
    for (let i = 1; i <= 20; i++) await complete(new Date(base.getTime() + i * 60_000), i * 1000);
    const latency = await getCompletionLatency(t.db, since);
    expect(latency.count).toBe(20);
    expect(latency.medianMs).toBe(10_500);
    expect(latency.p95Ms).toBe(19_050);
  });

  it("buckets completed and failed requests over time, with empty buckets present", async () => {
    const start = new Date("2030-04-01T00:00:00.000Z");
    await complete(new Date(start.getTime() + 5 * 60_000), 1000);
    await complete(new Date(start.getTime() + 6 * 60_000), 1000);
    const f = await newRequest(new Date(start.getTime() + 2 * 3600_000));
    await advance(f.id, "approved", new Date(start.getTime() + 2 * 3600_000));
    await advance(f.id, "relayed", new Date(start.getTime() + 2 * 3600_000));
    await advance(f.id, "failed", new Date(start.getTime() + 2 * 3600_000 + 10_000));
    const series = await getOutcomeSeries(t.db, { since: start, until: new Date(start.getTime() + 4 * 3600_000), bucketSeconds: 3600 });
    expect(series.map((b) => [b.start.toISOString(), b.completed, b.failed])).toEqual([
      ["2030-04-01T00:00:00.000Z", 2, 0],
      ["2030-04-01T01:00:00.000Z", 0, 0],
      ["2030-04-01T02:00:00.000Z", 0, 1],
      ["2030-04-01T03:00:00.000Z", 0, 0],
    ]);
  });

  it("reports the queue depth of each open stage", async () => {
    const before = await getQueueDepth(t.db);
    const a = await newRequest(new Date());
    const b = await newRequest(new Date());
    await advance(b.id, "approved", new Date());
    const after = await getQueueDepth(t.db);
    const depth = (q: typeof after, s: string) => q.find((x) => x.stage === s)!.depth;
    expect(depth(after, "pending")).toBe(depth(before, "pending") + 1);
    expect(depth(after, "approved")).toBe(depth(before, "approved") + 1);
    expect(after.map((q) => q.stage)).toEqual(["pending", "approved", "relayed"]);
    expect(a.id).toBeDefined();
    // "Ready" is the database's judgement: this server's clock an hour behind (a step, a skew) changes nothing.
    // Before, every request became not ready.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      expect(await getQueueDepth(t.db)).toEqual(after);
    } finally {
      vi.useRealTimers();
    }
  });

  it("lists worker heartbeats and relayer accounts with their next nonce", async () => {
    await t.db.insert(workerHeartbeats).values({ workerId: `w-${randomUUID()}`, hostname: "h", pid: 1 });
    const address = hex(20);
    await t.db.insert(relayerAccounts).values({ address, chainId: 31337, nextNonce: 7 });
    expect((await listWorkerHeartbeats(t.db)).length).toBeGreaterThan(0);
    const accounts = await listRelayerAccounts(t.db);
    expect(accounts.find((a) => a.address === address)).toMatchObject({ nextNonce: 7, inFlight: 0 });
  });
});

describe("requests table", () => {
  it("classifies a search as an address, a request id or a transaction hash, in any case", () => {
    const address = "0x" + "Ab".repeat(20);
    const hash = "0x" + "Cd".repeat(32);
    const id = randomUUID().toUpperCase();
    expect(classifyRequestSearch(` ${address} `)).toEqual({ kind: "address", value: address.toLowerCase() });
    expect(classifyRequestSearch(hash)).toEqual({ kind: "hash", value: hash.toLowerCase() });
    expect(classifyRequestSearch(id)).toEqual({ kind: "id", value: id.toLowerCase() });
    expect(classifyRequestSearch("hello")).toEqual({ kind: "invalid", value: "hello" });
    expect(classifyRequestSearch("  ")).toBeUndefined();
  });

  it("round-trips a keyset cursor and refuses a forged one", () => {
    const c = { requestedAt: new Date("2030-01-01T00:00:00.123Z"), id: randomUUID() };
    expect(decodeRequestCursor(encodeRequestCursor(c))).toEqual(c);
    expect(decodeRequestCursor("garbage")).toBeUndefined();
    expect(decodeRequestCursor(Buffer.from("2030-01-01_notauuid").toString("base64url"))).toBeUndefined();
    // Dates JavaScript accepts but PostgreSQL does not (year 0, negative, six digits) are refused, not sent.
    for (const iso of ["0000-01-01T00:00:00.000Z", "-000001-01-01T00:00:00.000Z", "+275760-09-13T00:00:00.000Z", "+010000-01-01T00:00:00.000Z"]) {
      expect(decodeRequestCursor(Buffer.from(`${iso}_${randomUUID()}`).toString("base64url")), iso).toBeUndefined();
    }
    const edge = { requestedAt: new Date("9999-12-31T23:59:59.999Z"), id: randomUUID() };
    expect(decodeRequestCursor(encodeRequestCursor(edge))).toEqual(edge);
  });

  it("walks every request of a range once, forwards and back, with keyset pagination", async () => {
    const from = new Date("2031-01-01T00:00:00.000Z");
    const ids: string[] = [];
    // 23 requests, two of them at the same instant (the id breaks the tie).
    for (let i = 0; i < 22; i++) ids.push((await newRequest(new Date(from.getTime() + i * 1000))).id);
    ids.push((await newRequest(new Date(from.getTime() + 21 * 1000))).id);
    const to = new Date(from.getTime() + 3600_000);
    const seen: string[] = [];
    const pages: Awaited<ReturnType<typeof listRequests>>[] = [];
    let after: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof listRequests>> = await listRequests(t.db, {
        from,
        to,
        limit: 10,
        after: after ? decodeRequestCursor(after) : undefined,
      });
      pages.push(page);
      seen.push(...page.rows.map((r) => r.id));
      after = page.olderCursor;
    } while (after);
    expect(pages.map((p) => p.rows.length)).toEqual([10, 10, 3]);
    expect(new Set(seen).size).toBe(23);
    expect(seen.sort()).toEqual([...ids].sort());
    expect(pages[0]!.newerCursor).toBeNull();

    // Back from the last page to the second gives the same rows in the same order.
    const back = await listRequests(t.db, { from, to, limit: 10, before: decodeRequestCursor(pages[2]!.newerCursor!) });
    expect(back.rows.map((r) => r.id)).toEqual(pages[1]!.rows.map((r) => r.id));
    expect(back.olderCursor).not.toBeNull();
  });

  it("filters by status and finds a request by address, id and transaction hash", async () => {
    const { request, hash } = await complete(new Date("2032-01-01T00:00:00.000Z"), 2000);
    const byHash = await listRequests(t.db, { search: classifyRequestSearch(hash.toUpperCase().replace("0X", "0x")) });
    expect(byHash.rows.map((r) => [r.id, r.transactionHash, r.relayAttempts])).toEqual([[request.id, hash, 1]]);
    const byAddress = await listRequests(t.db, { search: classifyRequestSearch(request.walletAddress) });
    expect(byAddress.rows.map((r) => r.id)).toEqual([request.id]);
    const byId = await listRequests(t.db, { search: classifyRequestSearch(request.id) });
    expect(byId.rows.map((r) => r.id)).toEqual([request.id]);
    const wrongStatus = await listRequests(t.db, { search: classifyRequestSearch(request.id), statuses: ["failed"] });
    expect(wrongStatus.rows).toEqual([]);
    const nonsense = await listRequests(t.db, { search: classifyRequestSearch("not-a-thing") });
    expect(nonsense.rows).toEqual([]);
  });

  it("shows a request's timeline, audit trail and every relay attempt", async () => {
    const { request, hash } = await complete(new Date("2033-01-01T00:00:00.000Z"), 3000);
    const detail = await getRequestDetail(t.db, request.id);
    expect(detail?.events.map((e) => [e.fromStatus, e.toStatus, e.actor])).toEqual([
      [null, "pending", "api"],
      ["pending", "approved", "worker:test"],
      ["approved", "relayed", "worker:test"],
      ["relayed", "completed", "worker:test"],
    ]);
    expect(detail?.relays.map((r) => [r.relayAttempt, r.transactionHash])).toEqual([[1, hash]]);
    expect(detail?.wallet?.walletAddress).toBe(request.walletAddress);
    expect(await getRequestDetail(t.db, randomUUID())).toBeNull();
    expect(await getRequestDetail(t.db, "nope")).toBeNull();
  });
});
