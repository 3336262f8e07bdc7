import { and, eq, sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { rateLimitHits, sponsorshipRequests, wallets } from "@/db/schema";
import { callApi, expectProblem, randomAddress, reconfigure, setupApiTestContext } from "@/test/api-client";
import { blockWallet } from "@/lib/sponsorship/blocks";
import { setClockForTests } from "@/lib/sponsorship/clock";
import { sponsorshipRequestResponse, walletResponse } from "@/lib/sponsorship/schemas";

const ctx = setupApiTestContext();
afterEach(() => setClockForTests(undefined));

let ipCounter = 0;
/** A fresh client address per use, so tests do not share IP counters. */
const freshIp = () => `10.${(++ipCounter >> 8) & 255}.${ipCounter & 255}.${Math.floor(Math.random() * 250) + 1}`;

async function registered(ip = freshIp()) {
  const address = randomAddress();
  expect((await callApi({ path: "/wallets/register", body: { walletAddress: address }, ip })).status).toBe(201);
  return address;
}

const requestSponsorship = (walletAddress: unknown, ip: string, headers: Record<string, string> = {}) =>
  callApi({ path: "/sponsorship/request", body: { walletAddress }, ip, headers });

const walletOf = async (address: string) => walletResponse.parse((await callApi({ path: `/wallets/${address}` })).json);

async function requestsOf(address: string) {
  return ctx.t.db.select().from(sponsorshipRequests).where(eq(sponsorshipRequests.walletAddress, address));
}

/** Moves a request to a terminal status the legal way (the database refuses anything else). */
async function finish(id: string, status: "completed" | "failed" | "rejected") {
  const at = new Date();
  const set = (values: Partial<typeof sponsorshipRequests.$inferInsert>) =>
    ctx.t.db
      .update(sponsorshipRequests)
      .set({ ...values, statusActor: "test" })
      .where(eq(sponsorshipRequests.id, id));
  if (status === "rejected") return set({ status: "rejected", rejectedAt: at, eligibilityReason: "wallet_blocked" });
  await set({ status: "approved", approvedAt: at, eligibilityReason: "eligible" });
  await set({ status: "relayed", relayedAt: at });
  await set(status === "completed" ? { status, completedAt: at } : { status, failedAt: at });
}

describe("POST /sponsorship/request: creation", () => {
  it("answers 201 with every field of the request: pending, outcome timestamps null, IP and User-Agent captured", async () => {
    const ip = freshIp();
    const address = await registered();
    const before = await walletOf(address);
    const answer = await requestSponsorship(address.toUpperCase().replace("0X", "0x"), ip, { "user-agent": "test-agent/1.0" });
    expect(answer.status).toBe(201);
    const created = sponsorshipRequestResponse.parse(answer.json);
    expect(created).toMatchObject({
      walletId: before.id,
      walletAddress: address,
      status: "pending",
      approvedAt: null,
      rejectedAt: null,
      completedAt: null,
      failedAt: null,
      ipAddress: ip,
      userAgent: "test-agent/1.0",
      eligibilityReason: null,
    });
    expect(answer.headers.get("location")).toBe(`/sponsorship/${created.id}`);
    expect((await walletOf(address)).sponsorshipCount).toBe(1);
    const [row] = await requestsOf(address);
    expect(row!.requestedAt.toISOString()).toBe(created.requestedAt);
  });

  it("records userAgent null when the header is absent", async () => {
    const address = await registered();
    const created = sponsorshipRequestResponse.parse((await requestSponsorship(address, freshIp())).json);
    expect(created.userAgent).toBeNull();
  });

  it("answers 404 wallet_not_registered for an address never registered", async () => {
    expectProblem(await requestSponsorship(randomAddress(), freshIp()), 404, "wallet_not_registered");
  });

  it("validates the body like registration: 400 invalid_address, 422 invalid_value, 422 unexpected_field, 400 invalid_json, 415, 413", async () => {
    const ip = freshIp();
    expectProblem(await callApi({ path: "/sponsorship/request", body: {}, ip }), 400, "invalid_address");
    expectProblem(await requestSponsorship("0xnothex", ip), 400, "invalid_address");
    expectProblem(await requestSponsorship(12, ip), 422, "invalid_value");
    expectProblem(await callApi({ path: "/sponsorship/request", body: { walletAddress: randomAddress(), ipAddress: "1.1.1.1" }, ip }), 422, "unexpected_field");
    expectProblem(
      await callApi({ path: "/sponsorship/request", rawBody: "not json", headers: { "content-type": "application/json" }, ip }),
      400,
      "invalid_json",
    );
    expectProblem(await callApi({ path: "/sponsorship/request", rawBody: "{}", headers: { "content-type": "text/plain" }, ip }), 415, "unsupported_media_type");
    expectProblem(
      await callApi({ path: "/sponsorship/request", rawBody: " ".repeat(16 * 1024 + 1), headers: { "content-type": "application/json" }, ip }),
      413,
      "payload_too_large",
    );
    // None of these counted against the IP: refused before validation passed.
    const hits = await ctx.t.db.select().from(rateLimitHits).where(eq(rateLimitHits.key, ip));
    expect(hits).toHaveLength(0);
  });
});

describe("POST /sponsorship/request: open requests, eligibility, replay", () => {
  it("answers 409 request_open while a request of the wallet is pending, approved or relayed", async () => {
    const address = await registered();
    expect((await requestSponsorship(address, freshIp())).status).toBe(201);
    expectProblem(await requestSponsorship(address, freshIp()), 409, "request_open");
    expect(await requestsOf(address)).toHaveLength(1);
  });

  it("accepts a new request after the previous one failed (it starts from pending)", async () => {
    const address = await registered();
    const first = sponsorshipRequestResponse.parse((await requestSponsorship(address, freshIp())).json);
    await finish(first.id, "failed");
    const again = await requestSponsorship(address, freshIp());
    expect(again.status).toBe(201);
    expect(sponsorshipRequestResponse.parse(again.json).status).toBe("pending");
    expect((await walletOf(address)).sponsorshipCount).toBe(2);
  });

  it("answers 422 already_sponsored when the wallet has a completed request", async () => {
    const address = await registered();
    const first = sponsorshipRequestResponse.parse((await requestSponsorship(address, freshIp())).json);
    await finish(first.id, "completed");
    expectProblem(await requestSponsorship(address, freshIp()), 422, "already_sponsored");
  });

  it("answers 422 wallet_blocked for a wallet blocked by an administrator", async () => {
    const address = await registered();
    await blockWallet(ctx.t.db, { walletAddress: address, reason: "abuse", actor: "admin:test" });
    expectProblem(await requestSponsorship(address, freshIp()), 422, "wallet_blocked");
    expect(await requestsOf(address)).toHaveLength(0);
  });

  it("answers a repeat from the same IP within 5 seconds with 200 and the existing request, creating and counting nothing", async () => {
    const ip = freshIp();
    const address = await registered();
    const t0 = Date.now();
    setClockForTests(() => new Date(t0));
    const first = await requestSponsorship(address, ip, { "user-agent": "a" });
    expect(first.status).toBe(201);
    const hitsBefore = await ctx.t.db.select().from(rateLimitHits).where(eq(rateLimitHits.key, ip));
    setClockForTests(() => new Date(t0 + 4_999));
    const replay = await requestSponsorship(address, ip, { "user-agent": "b" });
    expect(replay.status).toBe(200);
    expect(sponsorshipRequestResponse.parse(replay.json)).toEqual(first.json);
    expect(await requestsOf(address)).toHaveLength(1);
    expect((await walletOf(address)).sponsorshipCount).toBe(1);
    expect(await ctx.t.db.select().from(rateLimitHits).where(eq(rateLimitHits.key, ip))).toHaveLength(hitsBefore.length);
    // After the window the same repeat is a new attempt: 409 while the first is open.
    setClockForTests(() => new Date(t0 + 5_000));
    expectProblem(await requestSponsorship(address, ip), 409, "request_open");
  });

  it("answers a repeat from another address of the same IPv6 /64 as a replay (one client identity), and one from another /64 as a new attempt", async () => {
    const address = await registered();
    const first = await requestSponsorship(address, "2001:db8:77:1::1");
    expect(first.status).toBe(201);
    const replay = await requestSponsorship(address, "2001:db8:77:1:ffff:ffff:ffff:fffe");
    expect(replay.status).toBe(200);
    expect(sponsorshipRequestResponse.parse(replay.json).id).toBe(sponsorshipRequestResponse.parse(first.json).id);
    // ipAddress stays the full address the request was created from.
    expect(sponsorshipRequestResponse.parse(replay.json).ipAddress).toBe("2001:db8:77:1::1");
    expectProblem(await requestSponsorship(address, "2001:db8:77:2::1"), 409, "request_open");
    expect(await requestsOf(address)).toHaveLength(1);
  });

  it("does not treat the same wallet from another IP as a replay", async () => {
    const address = await registered();
    expect((await requestSponsorship(address, freshIp())).status).toBe(201);
    expectProblem(await requestSponsorship(address, freshIp()), 409, "request_open");
  });

  it("creates exactly one request from 50 concurrent requests for one wallet from 50 IPs", async () => {
    const address = await registered();
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => requestSponsorship(address, `172.16.${i}.1`)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    for (const answer of answers.filter((a) => a.status !== 201)) {
      expect([409, 429]).toContain(answer.status);
      expect(answer.headers.get("content-type")).toBe("application/problem+json");
    }
    expect(await requestsOf(address)).toHaveLength(1);
    expect((await walletOf(address)).sponsorshipCount).toBe(1);
  });

  it("answers 50 concurrent identical requests (same wallet, same IP) with one 201 and 49 replays of it", async () => {
    const address = await registered();
    const ip = freshIp();
    const answers = await Promise.all(Array.from({ length: 50 }, () => requestSponsorship(address, ip)));
    const created = answers.filter((a) => a.status === 201);
    expect(created).toHaveLength(1);
    const id = sponsorshipRequestResponse.parse(created[0]!.json).id;
    for (const a of answers.filter((x) => x.status !== 201)) {
      expect(a.status).toBe(200);
      expect(sponsorshipRequestResponse.parse(a.json).id).toBe(id);
    }
  });
});

describe("POST /sponsorship/request: order of checks", () => {
  it("validates the body before anything else", async () => {
    const ip = freshIp();
    reconfigure(ctx, { RATE_LIMIT_IP_PER_HOUR: "1" });
    try {
      await requestSponsorship(randomAddress(), ip); // uses the IP's one request (404)
      expectProblem(await requestSponsorship("bad", ip), 400, "invalid_address");
      expectProblem(await requestSponsorship(randomAddress(), ip), 429, "rate_limited");
    } finally {
      reconfigure(ctx, {});
    }
  });

  it("checks the IP limit before the wallet is looked up, and counts an unregistered wallet against the IP", async () => {
    const ip = freshIp();
    reconfigure(ctx, { RATE_LIMIT_IP_PER_HOUR: "2" });
    try {
      expectProblem(await requestSponsorship(randomAddress(), ip), 404, "wallet_not_registered");
      expectProblem(await requestSponsorship(randomAddress(), ip), 404, "wallet_not_registered");
      expectProblem(await requestSponsorship(randomAddress(), ip), 429, "rate_limited");
    } finally {
      reconfigure(ctx, {});
    }
  });

  it("answers a replay before looking at the wallet's block", async () => {
    const ip = freshIp();
    const address = await registered();
    const first = await requestSponsorship(address, ip);
    await blockWallet(ctx.t.db, { walletAddress: address, reason: "abuse", actor: "admin:test" });
    const replay = await requestSponsorship(address, ip);
    expect(replay.status).toBe(200);
    expect(sponsorshipRequestResponse.parse(replay.json).id).toBe(sponsorshipRequestResponse.parse(first.json).id);
  });

  it("answers wallet_blocked (422) before request_open (409)", async () => {
    const address = await registered();
    expect((await requestSponsorship(address, freshIp())).status).toBe(201);
    await blockWallet(ctx.t.db, { walletAddress: address, reason: "abuse", actor: "admin:test" });
    expectProblem(await requestSponsorship(address, freshIp()), 422, "wallet_blocked");
  });

  it("answers request_open (409) before already_sponsored (422)", async () => {
    const address = await registered();
    const first = sponsorshipRequestResponse.parse((await requestSponsorship(address, freshIp())).json);
    await finish(first.id, "completed");
    // A second, open request next to the completed one (inserted directly: the API would refuse it).
    const [wallet] = await ctx.t.db.select().from(wallets).where(eq(wallets.walletAddress, address));
    await ctx.t.db.insert(sponsorshipRequests).values({ walletId: wallet!.id, walletAddress: address, ipAddress: "192.0.2.9" });
    expectProblem(await requestSponsorship(address, freshIp()), 409, "request_open");
  });

  it("answers the wallet limit (429) before request_open (409)", async () => {
    reconfigure(ctx, { RATE_LIMIT_WALLET_PER_HOUR: "2" });
    try {
      const address = await registered();
      expect((await requestSponsorship(address, freshIp())).status).toBe(201);
      expectProblem(await requestSponsorship(address, freshIp()), 409, "request_open");
      expectProblem(await requestSponsorship(address, freshIp()), 429, "rate_limited");
    } finally {
      reconfigure(ctx, {});
    }
  });
});

describe("POST /sponsorship/request: rate limits and automatic blocks", () => {
  it("answers the 11th request from one IP within the hour with 429 + Retry-After; the IP stays blocked for the block length while another IP is served", async () => {
    const ip = freshIp();
    const addresses = await Promise.all(Array.from({ length: 13 }, () => registered()));
    const t0 = Date.parse("2031-01-01T00:00:00.000Z");
    // Ten requests, one a minute, from minute 0 to minute 9.
    for (let i = 0; i < 10; i++) {
      setClockForTests(() => new Date(t0 + i * 60_000));
      expect((await requestSponsorship(addresses[i]!, ip)).status).toBe(201);
    }
    // The 11th, at minute 50: over the limit, blocked for 15 minutes (until minute 65; the hour frees at minute 60).
    const at11 = t0 + 50 * 60_000;
    setClockForTests(() => new Date(at11));
    const eleventh = await requestSponsorship(addresses[10]!, ip);
    expectProblem(eleventh, 429, "rate_limited");
    expect(eleventh.headers.get("retry-after")).toBe(String(15 * 60));
    // Another IP is served meanwhile.
    expect((await requestSponsorship(addresses[11]!, freshIp())).status).toBe(201);
    // Still blocked one second before the end of the block, although the hour has room again by then.
    setClockForTests(() => new Date(at11 + 15 * 60_000 - 1_000));
    expectProblem(await requestSponsorship(addresses[10]!, ip), 429, "rate_limited");
    // Served when the block ends.
    setClockForTests(() => new Date(at11 + 15 * 60_000));
    expect((await requestSponsorship(addresses[10]!, ip)).status).toBe(201);
    const [block] = await ctx.t.db.execute<{ kind: string; created_by: string }>(
      sql`SELECT kind, created_by FROM blocks WHERE subject_type = 'ip' AND subject = ${ip}`,
    );
    expect(block).toMatchObject({ kind: "automatic", created_by: "rate_limiter" });
  });

  it("sets Retry-After to when a retry can succeed: the end of the rolling hour when it is later than the block", async () => {
    const ip = freshIp();
    const addresses = await Promise.all(Array.from({ length: 11 }, () => registered()));
    const t0 = Date.parse("2031-02-01T00:00:00.000Z");
    setClockForTests(() => new Date(t0));
    for (let i = 0; i < 10; i++) expect((await requestSponsorship(addresses[i]!, ip)).status).toBe(201);
    const refused = await requestSponsorship(addresses[10]!, ip);
    expectProblem(refused, 429, "rate_limited");
    expect(refused.headers.get("retry-after")).toBe("3600");
  });

  it("answers the 6th request of a wallet within the hour with 429; isBlocked is true during the block and false after it", async () => {
    const address = await registered();
    const t0 = Date.parse("2031-03-01T00:00:00.000Z");
    setClockForTests(() => new Date(t0));
    expect((await requestSponsorship(address, freshIp())).status).toBe(201);
    for (let i = 2; i <= 5; i++) expectProblem(await requestSponsorship(address, freshIp()), 409, "request_open");
    const sixth = await requestSponsorship(address, freshIp());
    expectProblem(sixth, 429, "rate_limited");
    expect(Number(sixth.headers.get("retry-after"))).toBeGreaterThanOrEqual(15 * 60);
    expect((await walletOf(address)).isBlocked).toBe(true);
    // Another wallet is served meanwhile.
    expect((await requestSponsorship(await registered(), freshIp())).status).toBe(201);
    setClockForTests(() => new Date(t0 + 15 * 60_000 - 1));
    expect((await walletOf(address)).isBlocked).toBe(true);
    setClockForTests(() => new Date(t0 + 15 * 60_000));
    expect((await walletOf(address)).isBlocked).toBe(false);
  });

  it("counts refused requests (409, 422) but not 429s or replays", async () => {
    const ip = freshIp();
    const address = await registered();
    const t0 = Date.parse("2031-04-01T00:00:00.000Z");
    setClockForTests(() => new Date(t0));
    await requestSponsorship(address, ip); // 201: counts
    await requestSponsorship(address, ip); // replay: does not count
    setClockForTests(() => new Date(t0 + 10_000));
    await requestSponsorship(address, ip); // 409: counts
    const count = async (scope: "sponsorship_ip" | "sponsorship_wallet", key: string) =>
      (
        await ctx.t.db
          .select()
          .from(rateLimitHits)
          .where(and(eq(rateLimitHits.scope, scope), eq(rateLimitHits.key, key)))
      ).length;
    expect(await count("sponsorship_ip", ip)).toBe(2);
    expect(await count("sponsorship_wallet", address)).toBe(2);
  });

  it("shares counters through the database: a hit recorded by another instance counts", async () => {
    const ip = freshIp();
    reconfigure(ctx, { RATE_LIMIT_IP_PER_HOUR: "1" });
    try {
      await ctx.t.db.insert(rateLimitHits).values({ scope: "sponsorship_ip", key: ip, createdAt: new Date() });
      expectProblem(await requestSponsorship(await registered(), ip), 429, "rate_limited");
    } finally {
      reconfigure(ctx, {});
    }
  });
});
