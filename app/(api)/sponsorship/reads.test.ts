import { randomBytes, randomUUID } from "node:crypto";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { removeExpiredPersonalData } from "@/db/queries/ip-retention";
import { relayTransactions, sponsorshipRequests } from "@/db/schema";
import { callApi, callRoute, expectProblem, randomAddress, reconfigure, setupApiTestContext } from "@/test/api-client";
import { blockWallet } from "@/lib/sponsorship/blocks";
import {
  relayTransactionResponse,
  sponsorshipRequestByTransactionResponse,
  sponsorshipRequestDetailResponse,
  sponsorshipRequestResponse,
  walletResponse,
} from "@/lib/sponsorship/schemas";

const ctx = setupApiTestContext();
const hash = () => `0x${randomBytes(32).toString("hex")}`;

async function createdRequest() {
  const address = randomAddress();
  await callApi({ path: "/wallets/register", body: { walletAddress: address } });
  const answer = await callApi({
    path: "/sponsorship/request",
    body: { walletAddress: address },
    ip: `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`,
    headers: { "user-agent": "reads-test" },
  });
  expect(answer.status).toBe(201);
  return sponsorshipRequestResponse.parse(answer.json);
}

/** A request that went approved -> relayed with a failed first attempt and a confirmed second one. */
async function relayedRequest() {
  const request = await createdRequest();
  const at = new Date();
  const update = (values: Partial<typeof sponsorshipRequests.$inferInsert>) =>
    ctx.t.db
      .update(sponsorshipRequests)
      .set({ ...values, statusActor: "worker:test" })
      .where(eq(sponsorshipRequests.id, request.id));
  await update({ status: "approved", approvedAt: at, eligibilityReason: "eligible" });
  await update({ status: "relayed", relayedAt: at });
  const first = { id: randomUUID(), hash: hash() };
  const second = { id: randomUUID(), hash: hash() };
  // Inserted out of order: the API orders by attempt.
  await ctx.t.db.insert(relayTransactions).values([
    { id: second.id, sponsorshipRequestId: request.id, relayAttempt: 2, status: "confirmed", transactionHash: second.hash, submittedAt: at, confirmedAt: at },
    {
      id: first.id,
      sponsorshipRequestId: request.id,
      relayAttempt: 1,
      status: "failed",
      transactionHash: first.hash,
      submittedAt: at,
      failedAt: at,
      failureReason: "not mined within the relay timeout",
    },
  ]);
  return { request, first, second, at };
}

describe("GET /sponsorship/:id", () => {
  it("returns the full record: request fields, eligibilityReason, wallet and relayTransactions ([] while none exists)", async () => {
    const request = await createdRequest();
    const answer = await callApi({ path: `/sponsorship/${request.id}`, ip: request.ipAddress });
    expect(answer.status).toBe(200);
    const detail = sponsorshipRequestDetailResponse.parse(answer.json);
    expect(detail).toEqual({
      ...request,
      wallet: { id: request.walletId, walletAddress: request.walletAddress, sponsorshipCount: 1, isBlocked: false },
      relayTransactions: [],
    });
  });

  it("lists relay attempts ordered by relayAttempt, without sponsorshipRequestId, and shows the wallet's block", async () => {
    const { request, first, second, at } = await relayedRequest();
    await blockWallet(ctx.t.db, { walletAddress: request.walletAddress, reason: "test", actor: "admin:test" });
    const detail = sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${request.id.toUpperCase()}` })).json);
    expect(detail.status).toBe("relayed");
    expect(detail.approvedAt).toBe(at.toISOString());
    expect(detail.eligibilityReason).toBe("eligible");
    expect(detail.wallet.isBlocked).toBe(true);
    expect(detail.relayTransactions).toEqual([
      {
        id: first.id,
        status: "failed",
        relayAttempt: 1,
        transactionHash: first.hash,
        submittedAt: at.toISOString(),
        confirmedAt: null,
        failedAt: at.toISOString(),
        failureReason: "not mined within the relay timeout",
      },
      {
        id: second.id,
        status: "confirmed",
        relayAttempt: 2,
        transactionHash: second.hash,
        submittedAt: at.toISOString(),
        confirmedAt: at.toISOString(),
        failedAt: null,
        failureReason: null,
      },
    ]);
  });

  it("answers 400 invalid_id for an id that is not a UUID and 404 request_not_found for an unknown one", async () => {
    for (const bad of ["abc", "123", `${randomUUID()}0`, randomUUID().replaceAll("-", "")]) {
      expectProblem(await callApi({ path: `/sponsorship/${bad}` }), 400, "invalid_id");
    }
    expectProblem(await callApi({ path: `/sponsorship/${randomUUID()}` }), 404, "request_not_found");
    // Canonical form without a version digit is still a UUID.
    expectProblem(await callApi({ path: "/sponsorship/00000000-0000-0000-0000-000000000000" }), 404, "request_not_found");
  });
});

describe("GET /sponsorship/tx/:hash", () => {
  it("finds the request owning a relay transaction, case-insensitively, in the same shape as GET /sponsorship/:id", async () => {
    const { request, first, second } = await relayedRequest();
    const byId = (await callApi({ path: `/sponsorship/${request.id}` })).json as object;
    for (const h of [first.hash, second.hash.toUpperCase().replace("0X", "0x"), second.hash.toUpperCase()]) {
      const answer = await callApi({ path: `/sponsorship/tx/${h}` });
      expect(answer.status).toBe(200);
      expect(sponsorshipRequestByTransactionResponse.parse(answer.json)).toEqual({ ...byId, ipAddress: null, userAgent: null });
    }
  });

  it("answers ipAddress and userAgent as null: a transaction hash is public (decisions.md, Privacy)", async () => {
    const { request, second } = await relayedRequest();
    const byId = sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${request.id}`, ip: request.ipAddress })).json);
    // The requester, asking by id, sees both.
    expect(byId.ipAddress).toBe(request.ipAddress);
    expect(byId.userAgent).toBe(request.userAgent);
    expect(byId.userAgent).not.toBeNull();

    const answer = await callApi({ path: `/sponsorship/tx/${second.hash}` });
    expect(answer.status).toBe(200);
    const byHash = answer.json as Record<string, unknown>;
    expect(byHash).toHaveProperty("ipAddress", null);
    expect(byHash).toHaveProperty("userAgent", null);
    expect(JSON.stringify(byHash)).not.toContain(request.ipAddress);
    expect(JSON.stringify(byHash)).not.toContain(request.userAgent!);
  });

  it("gives away no IP through the id either: GET /sponsorship/:id answers both fields to the requester's client identity alone", async () => {
    const { request, second } = await relayedRequest();
    // The id is public data: this answer, and the wallet's history, give it to anyone holding the hash or the address.
    const byHash = sponsorshipRequestByTransactionResponse.parse((await callApi({ path: `/sponsorship/tx/${second.hash}`, ip: "192.0.2.99" })).json);
    const history = (await callApi({ path: `/wallets/${request.walletAddress}/history`, ip: "192.0.2.99" })).json as { requests: { id: string }[] };
    expect(history.requests.map((r) => r.id)).toContain(byHash.id);
    // Before: anyone with the id got the requester's IP and User-Agent.
    const stranger = await callApi({ path: `/sponsorship/${byHash.id}`, ip: "192.0.2.99" });
    expect(stranger.status).toBe(200);
    const seen = sponsorshipRequestDetailResponse.parse(stranger.json);
    expect(seen).toMatchObject({ id: request.id, ipAddress: null, userAgent: null });
    expect(stranger.text).not.toContain(request.ipAddress);
    expect(stranger.text).not.toContain(request.userAgent!);
    // Everything else is the requester's answer.
    const own = sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${request.id}`, ip: request.ipAddress })).json);
    expect(seen).toEqual({ ...own, ipAddress: null, userAgent: null });
  });

  it("counts the requester by its client identity: another address of its IPv6 /64 sees both fields, another /64 does not", async () => {
    const address = randomAddress();
    await callApi({ path: "/wallets/register", body: { walletAddress: address } });
    const created = await callApi({ path: "/sponsorship/request", body: { walletAddress: address }, ip: "2001:db8:5:6::1", headers: { "user-agent": "v6" } });
    expect(created.status).toBe(201);
    const { id } = sponsorshipRequestResponse.parse(created.json);
    const read = async (ip: string) => sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${id}`, ip })).json);
    expect(await read("2001:db8:5:6:ffff::9")).toMatchObject({ ipAddress: "2001:db8:5:6::1", userAgent: "v6" });
    expect(await read("2001:db8:5:7::1")).toMatchObject({ ipAddress: null, userAgent: null });
    // The limits may count a whole /48 as one client; the IP is still shown to the /64 alone (one provider's
    // customers must not see each other's addresses), and a /128 shows it to the address alone.
    reconfigure(ctx, { IPV6_PREFIX_LENGTH: "48" });
    try {
      expect(await read("2001:db8:5:6::2")).toMatchObject({ ipAddress: "2001:db8:5:6::1" });
      expect(await read("2001:db8:5:7::1")).toMatchObject({ ipAddress: null, userAgent: null });
      reconfigure(ctx, { IPV6_PREFIX_LENGTH: "128" });
      expect(await read("2001:db8:5:6::1")).toMatchObject({ ipAddress: "2001:db8:5:6::1" });
      expect(await read("2001:db8:5:6::2")).toMatchObject({ ipAddress: null });
    } finally {
      reconfigure(ctx, {});
    }
  });

  it("answers 404 request_not_found when no relay has the hash, and 400 invalid_hash over 1,024 characters", async () => {
    expectProblem(await callApi({ path: `/sponsorship/tx/${hash()}` }), 404, "request_not_found");
    expectProblem(await callApi({ path: "/sponsorship/tx/not-a-hash" }), 404, "request_not_found");
    expectProblem(await callApi({ path: `/sponsorship/tx/${"a".repeat(1024)}` }), 404, "request_not_found");
    expectProblem(await callApi({ path: `/sponsorship/tx/${"a".repeat(1025)}` }), 400, "invalid_hash");
  });
});

describe("GET /relay/:id", () => {
  it("returns the relay record with sponsorshipRequestId", async () => {
    const { request, first, at } = await relayedRequest();
    const answer = await callApi({ path: `/relay/${first.id}` });
    expect(answer.status).toBe(200);
    expect(relayTransactionResponse.parse(answer.json)).toEqual({
      id: first.id,
      sponsorshipRequestId: request.id,
      status: "failed",
      relayAttempt: 1,
      transactionHash: first.hash,
      submittedAt: at.toISOString(),
      confirmedAt: null,
      failedAt: at.toISOString(),
      failureReason: "not mined within the relay timeout",
    });
  });

  it("answers 400 invalid_id and 404 relay_not_found; a request id is not a relay id", async () => {
    expectProblem(await callApi({ path: "/relay/xyz" }), 400, "invalid_id");
    expectProblem(await callApi({ path: `/relay/${randomUUID()}` }), 404, "relay_not_found");
    const request = await createdRequest();
    expectProblem(await callApi({ path: `/relay/${request.id}` }), 404, "relay_not_found");
  });
});

describe("a request whose IP address and User-Agent were removed (IP_RETENTION_DAYS)", () => {
  /** A request that failed after a relay attempt, then lost its personal data as the retention removes it. */
  async function requestWithoutPersonalData() {
    const relayed = await relayedRequest();
    await ctx.t.db
      .update(sponsorshipRequests)
      .set({ status: "failed", failedAt: relayed.at, failureReason: "test", statusActor: "worker:test" })
      .where(eq(sponsorshipRequests.id, relayed.request.id));
    const before = sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${relayed.request.id}`, ip: relayed.request.ipAddress })).json);
    expect(before.ipAddress).toBe(relayed.request.ipAddress);
    await ctx.t.db.update(sponsorshipRequests).set({ ipAddress: null, userAgent: null, clientKey: null }).where(eq(sponsorshipRequests.id, relayed.request.id));
    return { ...relayed, before };
  }

  it("is still answered by every read, with ipAddress and userAgent null and every other field as it was", async () => {
    const { request, first, before } = await requestWithoutPersonalData();

    // Null for the requester too.
    const byId = await callApi({ path: `/sponsorship/${request.id}`, ip: request.ipAddress });
    expect(byId.status).toBe(200);
    expect(sponsorshipRequestDetailResponse.parse(byId.json)).toEqual({ ...before, ipAddress: null, userAgent: null });

    const byHash = await callApi({ path: `/sponsorship/tx/${first.hash}` });
    expect(byHash.status).toBe(200);
    expect(sponsorshipRequestByTransactionResponse.parse(byHash.json)).toEqual({ ...before, ipAddress: null, userAgent: null });

    expect((await callApi({ path: `/relay/${first.id}` })).status).toBe(200);
    expect((await callApi({ path: `/wallets/${request.walletAddress}` })).status).toBe(200);
    const history = await callApi({ path: `/wallets/${request.walletAddress}/history` });
    expect(history.status).toBe(200);
    expect(JSON.stringify(history.json)).toContain(request.id);
  });

  it("is answered by the administrator's GET /admin/requests/:id and listed by GET /admin/requests", async () => {
    const { request } = await requestWithoutPersonalData();
    const token = "reads-test-admin-token-0123456789abcdef";
    reconfigure(ctx, { ADMIN_TOKEN: token });
    try {
      const signIn = await callRoute({ path: "/admin/sign-in", body: { token }, ip: "192.0.2.44" });
      expect(signIn.status).toBe(200);
      const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
      const detail = await callRoute({ path: `/admin/requests/${request.id}`, headers: { cookie } });
      expect(detail.status).toBe(200);
      expect(await detail.json()).toMatchObject({ request: { id: request.id, status: "failed", ipAddress: null, userAgent: null, clientKey: null } });
      const list = await callRoute({ path: `/admin/requests?q=${request.id}`, headers: { cookie } });
      expect(list.status).toBe(200);
      expect(JSON.stringify(await list.json())).toContain(request.id);
    } finally {
      reconfigure(ctx, {});
    }
  });

  it("after the retention pass: a request completed 100 days ago is answered by GET /sponsorship/:id with ipAddress null", async () => {
    const address = randomAddress();
    const wallet = walletResponse.parse((await callApi({ path: "/wallets/register", body: { walletAddress: address } })).json);
    const at = new Date(Date.now() - 100 * 24 * 3600_000);
    const [old] = await ctx.t.db
      .insert(sponsorshipRequests)
      .values({
        walletId: wallet.id,
        walletAddress: wallet.walletAddress,
        status: "completed",
        eligibilityReason: "eligible",
        ipAddress: "203.0.113.77",
        clientKey: "203.0.113.77",
        userAgent: "wallet-app/2.1",
        requestedAt: at,
        approvedAt: at,
        relayedAt: at,
        completedAt: at,
      })
      .returning();
    const relay = { id: randomUUID(), hash: hash() };
    await ctx.t.db.insert(relayTransactions).values({
      id: relay.id,
      sponsorshipRequestId: old!.id,
      relayAttempt: 1,
      status: "confirmed",
      transactionHash: relay.hash,
      submittedAt: at,
      confirmedAt: at,
    });
    const before = sponsorshipRequestDetailResponse.parse((await callApi({ path: `/sponsorship/${old!.id}`, ip: "203.0.113.77" })).json);
    expect(before.ipAddress).toBe("203.0.113.77");

    expect((await removeExpiredPersonalData(ctx.t.db, { retentionDays: 90 })).requests).toBe(1);

    const answer = await callApi({ path: `/sponsorship/${old!.id}`, ip: "203.0.113.77" });
    expect(answer.status).toBe(200);
    expect(sponsorshipRequestDetailResponse.parse(answer.json)).toEqual({ ...before, ipAddress: null, userAgent: null });
    expect((await callApi({ path: `/sponsorship/tx/${relay.hash}` })).status).toBe(200);
  });

  it("matches no replay: the same wallet from the same IP gets a new request (201)", async () => {
    const { request } = await requestWithoutPersonalData();
    // Created seconds ago, inside the replay window: with its client key it would be replayed (200).
    const again = await callApi({ path: "/sponsorship/request", body: { walletAddress: request.walletAddress }, ip: request.ipAddress });
    expect(again.status).toBe(201);
    expect(sponsorshipRequestResponse.parse(again.json)).toMatchObject({ ipAddress: request.ipAddress, status: "pending" });
  });
});
