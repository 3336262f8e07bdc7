import { randomUUID } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { sponsorshipRequests, wallets } from "@/db/schema";
import { callApi, expectProblem, randomAddress, reconfigure, setupApiTestContext } from "@/test/api-client";
import { blockWallet } from "@/lib/sponsorship/blocks";
import { setClockForTests } from "@/lib/sponsorship/clock";
import { historyResponse, walletResponse } from "@/lib/sponsorship/schemas";

const ctx = setupApiTestContext();
afterEach(() => setClockForTests(undefined));

const register = (walletAddress: unknown, ip?: string) => callApi({ path: "/wallets/register", body: { walletAddress }, ip });

describe("POST /wallets/register", () => {
  it("answers 201 with the whole Wallet for a new address, stored lowercase", async () => {
    const address = randomAddress();
    const answer = await register(address.toUpperCase().replace("0X", "0x"));
    expect(answer.status).toBe(201);
    expect(answer.headers.get("content-type")).toBe("application/json");
    const wallet = walletResponse.parse(answer.json);
    expect(wallet).toMatchObject({ walletAddress: address, sponsorshipCount: 0, isBlocked: false });
    expect(wallet.firstSeenAt).toBe(wallet.lastSeenAt);
    expect(answer.headers.get("location")).toBe(`/wallets/${address}`);
  });

  it("answers 200 with the same wallet when registered again, and moves lastSeenAt", async () => {
    const address = randomAddress();
    const t0 = new Date("2030-01-01T00:00:00.000Z");
    setClockForTests(() => t0);
    const first = walletResponse.parse((await register(address)).json);
    setClockForTests(() => new Date(t0.getTime() + 61_000));
    const again = await register(address);
    expect(again.status).toBe(200);
    const wallet = walletResponse.parse(again.json);
    expect(wallet.id).toBe(first.id);
    expect(wallet.firstSeenAt).toBe("2030-01-01T00:00:00.000Z");
    expect(wallet.lastSeenAt).toBe("2030-01-01T00:01:01.000Z");
  });

  it("registers a wallet blocked by an administrator and shows isBlocked true", async () => {
    const address = randomAddress();
    await blockWallet(ctx.t.db, { walletAddress: address, reason: "test", actor: "admin:test" });
    const wallet = walletResponse.parse((await register(address)).json);
    expect(wallet.isBlocked).toBe(true);
  });

  it("answers 400 invalid_address when walletAddress is missing or does not match the pattern", async () => {
    expectProblem(await callApi({ path: "/wallets/register", body: {} }), 400, "invalid_address");
    expectProblem(await register("0x123"), 400, "invalid_address");
    expectProblem(await register(`${randomAddress()}0`), 400, "invalid_address");
    expectProblem(await register(`0x${"g".repeat(40)}`), 400, "invalid_address");
    const problem = expectProblem(await register(""), 400, "invalid_address");
    expect(problem.errors?.[0]?.path).toBe("walletAddress");
  });

  it("answers 422 invalid_value when walletAddress is not a string", async () => {
    for (const value of [42, null, true, { a: 1 }, [randomAddress()]]) {
      expectProblem(await register(value), 422, "invalid_value");
    }
  });

  it("answers 422 unexpected_field for any other field, naming it", async () => {
    const problem = expectProblem(await callApi({ path: "/wallets/register", body: { walletAddress: randomAddress(), admin: true } }), 422, "unexpected_field");
    expect(problem.errors).toEqual([{ path: "admin", message: "is not an allowed field" }]);
  });

  it("answers 400 invalid_json for a body that is not JSON or not an object", async () => {
    for (const rawBody of ["{", "", "[1,2]", '"0xabc"', "null", "42"]) {
      expectProblem(await callApi({ path: "/wallets/register", rawBody, headers: { "content-type": "application/json" } }), 400, "invalid_json");
    }
  });

  it("answers 415 when the content type is not application/json, and accepts parameters", async () => {
    const rawBody = JSON.stringify({ walletAddress: randomAddress() });
    expectProblem(await callApi({ path: "/wallets/register", rawBody, headers: { "content-type": "text/plain" } }), 415, "unsupported_media_type");
    expectProblem(await callApi({ path: "/wallets/register", rawBody }), 415, "unsupported_media_type");
    const ok = await callApi({ path: "/wallets/register", rawBody, headers: { "content-type": "application/json; charset=utf-8" } });
    expect(ok.status).toBe(201);
  });

  it("answers 413 for a body over 16 KiB", async () => {
    const rawBody = JSON.stringify({ walletAddress: randomAddress(), pad: "x".repeat(16 * 1024) });
    expectProblem(await callApi({ path: "/wallets/register", rawBody, headers: { "content-type": "application/json" } }), 413, "payload_too_large");
  });

  it("limits registrations per IP (429 rate_limited with Retry-After) while other IPs are served", async () => {
    reconfigure(ctx, { REGISTER_LIMIT_IP_PER_HOUR: "3" });
    try {
      const ip = "192.0.2.77";
      for (let i = 0; i < 3; i++) expect((await register(randomAddress(), ip)).status).toBe(201);
      const refused = await register(randomAddress(), ip);
      expectProblem(refused, 429, "rate_limited");
      const retryAfter = Number(refused.headers.get("retry-after"));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600).toBe(true);
      expect((await register(randomAddress(), "192.0.2.78")).status).toBe(201);
    } finally {
      reconfigure(ctx, {});
    }
  });
});

describe("GET /wallets/:address", () => {
  it("finds a wallet by its address in any case", async () => {
    const address = randomAddress();
    await register(address);
    const answer = await callApi({ path: `/wallets/${address.toUpperCase().replace("0X", "0x")}` });
    expect(answer.status).toBe(200);
    expect(walletResponse.parse(answer.json).walletAddress).toBe(address);
  });

  it("answers 404 wallet_not_found for an unregistered address", async () => {
    expectProblem(await callApi({ path: `/wallets/${randomAddress()}` }), 404, "wallet_not_found");
  });

  it("answers 400 invalid_address for a path that is not an address", async () => {
    for (const bad of ["0x123", `${randomAddress()}ab`, "hello", "0x" + "z".repeat(40)]) {
      expectProblem(await callApi({ path: `/wallets/${bad}` }), 400, "invalid_address");
    }
  });
});

describe("GET /wallets/:address/history", () => {
  async function walletWithRequests(count: number) {
    const address = randomAddress();
    const [wallet] = await ctx.t.db.insert(wallets).values({ walletAddress: address }).returning();
    const base = Date.parse("2030-06-01T00:00:00.000Z");
    const rows = Array.from({ length: count }, (_, i) => {
      // Three requests share each timestamp: the id breaks the tie.
      const at = new Date(base + Math.floor(i / 3) * 1000);
      return {
        id: randomUUID(),
        walletId: wallet!.id,
        walletAddress: address,
        ipAddress: "192.0.2.1",
        requestedAt: at,
        status: "failed" as const,
        failedAt: at,
      };
    });
    await ctx.t.db.insert(sponsorshipRequests).values(rows);
    return { address, ids: rows.map((r) => r.id) };
  }

  it("walks 120 requests in pages of 50, 50 and 20, newest first, with no duplicate and no gap", async () => {
    const { address, ids } = await walletWithRequests(120);
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    let previous: { requestedAt: string; id: string } | undefined;
    do {
      const answer = await callApi({ path: `/wallets/${address}/history${cursor ? `?cursor=${cursor}` : ""}` });
      expect(answer.status).toBe(200);
      const page = historyResponse.parse(answer.json);
      sizes.push(page.requests.length);
      for (const item of page.requests) {
        if (previous) {
          const ordered = item.requestedAt < previous.requestedAt || (item.requestedAt === previous.requestedAt && item.id < previous.id);
          expect(ordered).toBe(true);
        }
        previous = item;
        seen.push(item.id);
      }
      cursor = page.nextCursor;
      if (cursor) expect(cursor).toBe(page.requests.at(-1)!.id);
    } while (cursor);
    expect(sizes).toEqual([50, 50, 20]);
    expect(new Set(seen).size).toBe(120);
    expect([...seen].sort()).toEqual([...ids].sort());
  });

  it("returns items with exactly the history fields, null timestamps when unset", async () => {
    const { address } = await walletWithRequests(1);
    const page = historyResponse.parse((await callApi({ path: `/wallets/${address}/history` })).json);
    expect(Object.keys(page.requests[0]!).sort()).toEqual(
      ["approvedAt", "completedAt", "failedAt", "id", "rejectedAt", "requestedAt", "status", "walletId"].sort(),
    );
    expect(page.requests[0]).toMatchObject({ approvedAt: null, completedAt: null, rejectedAt: null, status: "failed" });
    expect(page.nextCursor).toBeNull();
  });

  it("honours limit from 1 to 100", async () => {
    const { address } = await walletWithRequests(5);
    const one = historyResponse.parse((await callApi({ path: `/wallets/${address}/history?limit=1` })).json);
    expect(one.requests).toHaveLength(1);
    expect(one.nextCursor).toBe(one.requests[0]!.id);
    const hundred = historyResponse.parse((await callApi({ path: `/wallets/${address}/history?limit=100` })).json);
    expect(hundred.requests).toHaveLength(5);
    expect(hundred.nextCursor).toBeNull();
  });

  it("answers an empty first page for a registered wallet without requests", async () => {
    const address = randomAddress();
    await register(address);
    const page = historyResponse.parse((await callApi({ path: `/wallets/${address}/history` })).json);
    expect(page).toEqual({ requests: [], nextCursor: null });
  });

  it("answers 422 invalid_limit for a limit outside 1..100 or not an integer", async () => {
    const { address } = await walletWithRequests(1);
    for (const limit of ["0", "101", "1.5", "abc", "", "-1", "1e1"]) {
      expectProblem(await callApi({ path: `/wallets/${address}/history?limit=${limit}` }), 422, "invalid_limit");
    }
  });

  it("answers 422 invalid_cursor for a cursor that is not a UUID or not a request of this wallet", async () => {
    const { address } = await walletWithRequests(1);
    const other = await walletWithRequests(1);
    for (const cursor of ["abc", "", randomUUID(), other.ids[0]!]) {
      expectProblem(await callApi({ path: `/wallets/${address}/history?cursor=${cursor}` }), 422, "invalid_cursor");
    }
  });

  it("answers 404 for an unregistered wallet and 400 for a malformed address", async () => {
    expectProblem(await callApi({ path: `/wallets/${randomAddress()}/history` }), 404, "wallet_not_found");
    expectProblem(await callApi({ path: `/wallets/0x12/history` }), 400, "invalid_address");
  });
});
