import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminActions } from "@/db/schema";
import { parseConfig } from "@/lib/config";
import { setAppContextForTests } from "@/lib/http/app-context";
import { CLIENT_IP_HEADER } from "@/lib/http/client-ip";
import type { NextRouteHandler, RouteParams } from "@/lib/http/route";
import { isWalletBlocked } from "@/lib/sponsorship/blocks";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import * as overview from "./overview/route";
import * as requestDetail from "./requests/[id]/route";
import * as requests from "./requests/route";
import * as session from "./session/route";
import * as signIn from "./sign-in/route";
import * as signOut from "./sign-out/route";
import * as block from "./wallets/[address]/block/route";
import * as unblock from "./wallets/[address]/unblock/route";
import * as wallet from "./wallets/[address]/route";

const ADMIN_TOKEN = "admin-routes-test-token-0123456789";
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
  setAppContextForTests({ db: t.db, config: parseConfig({ ADMIN_TOKEN, LOG_LEVEL: "silent" }) });
});
afterAll(async () => {
  setAppContextForTests({});
  await t?.drop();
});

const address = () => `0x${randomBytes(20).toString("hex")}`;

function call(
  handler: NextRouteHandler,
  path: string,
  init: { method?: string; body?: unknown; cookie?: string; ip?: string; params?: RouteParams; headers?: Record<string, string> } = {},
) {
  const headers = new Headers({ [CLIENT_IP_HEADER]: init.ip ?? "192.0.2.10", ...init.headers });
  if (init.body !== undefined) headers.set("content-type", "application/json");
  if (init.cookie) headers.set("cookie", init.cookie);
  const request = new Request(`http://127.0.0.1:3000${path}`, {
    method: init.method ?? "GET",
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  return handler(request, { params: Promise.resolve(init.params ?? {}) });
}

async function signedInCookie(): Promise<string> {
  const response = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN } });
  expect(response.status).toBe(200);
  const setCookie = response.headers.get("set-cookie")!;
  return setCookie.split(";")[0]!;
}

describe("admin routes", () => {
  it("answer 401 problem+json to every request without a session, and change nothing", async () => {
    const target = address();
    const cases: [NextRouteHandler, string, { method?: string; body?: unknown; params?: RouteParams }][] = [
      [session.GET, "/admin/session", {}],
      [overview.GET, "/admin/overview", {}],
      [requests.GET, "/admin/requests", {}],
      [requestDetail.GET, "/admin/requests/x", { params: { id: "00000000-0000-0000-0000-000000000000" } }],
      [wallet.GET, `/admin/wallets/${target}`, { params: { address: target } }],
      [block.POST, `/admin/wallets/${target}/block`, { method: "POST", body: { reason: "x" }, params: { address: target } }],
      [unblock.POST, `/admin/wallets/${target}/unblock`, { method: "POST", body: { reason: "x" }, params: { address: target } }],
      [signOut.POST, "/admin/sign-out", { method: "POST" }],
    ];
    for (const [handler, path, init] of cases) {
      const response = await call(handler, path, init);
      expect(response.status, path).toBe(401);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      const body = await response.json();
      expect(body).toMatchObject({ status: 401, code: "unauthorized", requestId: expect.any(String) });
      expect(JSON.stringify(body)).not.toContain(target.slice(2, 10));
    }
    // A forged cookie is no session either, nor a malformed one (a bad percent-escape is not a 500).
    const forged = await call(overview.GET, "/admin/overview", { cookie: `admin_session=${"A".repeat(43)}` });
    expect(forged.status).toBe(401);
    for (const cookie of ["admin_session=%ZZ", "admin_session=%E0%A4%A"]) {
      const malformed = await call(overview.GET, "/admin/overview", { cookie });
      expect(malformed.status, cookie).toBe(401);
      expect((await malformed.json()).code).toBe("unauthorized");
    }
    expect(await isWalletBlocked(t.db, target)).toBe(false);
  });

  it("makes the cookie Secure only when server.ts established https, never for a client-sent X-Forwarded-Proto", async () => {
    const forged = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, headers: { "x-forwarded-proto": "https" } });
    expect(forged.status).toBe(200);
    expect(forged.headers.get("set-cookie")).not.toContain("Secure");
    const https = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, headers: { "x-client-proto": "https" } });
    expect(https.headers.get("set-cookie")).toContain("; Secure");
  });

  it("signs in with the token: an HttpOnly, SameSite=Strict session cookie that opens the admin routes", async () => {
    const response = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN } });
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^admin_session=[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Path=/");
    expect(setCookie).not.toContain("Secure"); // plain http here; over https the cookie is Secure
    const cookie = setCookie.split(";")[0]!;
    const me = await call(session.GET, "/admin/session", { cookie });
    expect(me.status).toBe(200);
    const overviewResponse = await call(overview.GET, "/admin/overview?range=1h", { cookie });
    expect(overviewResponse.status).toBe(200);
    expect(await overviewResponse.json()).toMatchObject({ range: "1h", treasury: { kind: "not_configured" } });
    // A range named like an Object.prototype member is an unknown range (the default), not a 500.
    for (const range of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      const o = await call(overview.GET, `/admin/overview?range=${range}`, { cookie });
      expect(o.status, range).toBe(200);
      expect((await o.json()).range).toBe("24h");
      const r = await call(requests.GET, `/admin/requests?range=${range}`, { cookie });
      expect(r.status, range).toBe(200);
      expect((await r.json()).filters.range).toBe("all");
    }
    // A forged cursor with a date PostgreSQL cannot take (year 0, six digits) is ignored, not a 500.
    for (const iso of ["0000-01-01T00:00:00.000Z", "+275760-09-13T00:00:00.000Z"]) {
      const cursor = Buffer.from(`${iso}_00000000-0000-0000-0000-000000000000`).toString("base64url");
      for (const name of ["after", "before"]) {
        expect((await call(requests.GET, `/admin/requests?${name}=${cursor}`, { cookie })).status, `${name} ${iso}`).toBe(200);
      }
    }
  });

  it("refuses a wrong token with 401 and limits failed sign-ins per IP with 429 and Retry-After", async () => {
    const ip = "192.0.2.77";
    for (let i = 0; i < 5; i++) {
      const r = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: `wrong-${i}` }, ip });
      expect(r.status).toBe(401);
      expect((await r.json()).code).toBe("invalid_token");
    }
    const limited = await call(signIn.POST, "/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, ip });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await limited.json()).code).toBe("rate_limited");
  });

  it("blocks and unblocks a wallet with a reason, audited with the session", async () => {
    const cookie = await signedInCookie();
    const target = address();
    const blocked = await call(block.POST, `/admin/wallets/${target}/block`, {
      method: "POST",
      body: { reason: "spam campaign" },
      params: { address: target },
      cookie,
    });
    expect(blocked.status).toBe(201);
    expect(await isWalletBlocked(t.db, target)).toBe(true);
    const noReason = await call(block.POST, `/admin/wallets/${target}/block`, { method: "POST", body: {}, params: { address: target }, cookie });
    expect(noReason.status).toBe(422);
    // A NUL in the reason (PostgreSQL text cannot hold it) is a 422, not a 500.
    for (const route of [block, unblock]) {
      const nul = await call(route.POST, `/admin/wallets/${target}/x`, { method: "POST", body: { reason: "a\u0000b" }, params: { address: target }, cookie });
      expect(nul.status).toBe(422);
      expect((await nul.json()).code).toBe("invalid_value");
    }
    const lifted = await call(unblock.POST, `/admin/wallets/${target}/unblock`, {
      method: "POST",
      body: { reason: "false positive" },
      params: { address: target },
      cookie,
    });
    expect(lifted.status).toBe(200);
    expect(await isWalletBlocked(t.db, target)).toBe(false);
    const audit = await t.db.select().from(adminActions).where(eq(adminActions.subject, target));
    expect(audit.map((a) => [a.action, a.reason, a.ipAddress]).sort()).toEqual([
      ["block_wallet", "spam campaign", "192.0.2.10"],
      ["unblock_wallet", "false positive", "192.0.2.10"],
    ]);
  });

  it("signs out: the cookie is cleared and the session refused afterwards", async () => {
    const cookie = await signedInCookie();
    const out = await call(signOut.POST, "/admin/sign-out", { method: "POST", cookie });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/^admin_session=; .*Max-Age=0/);
    expect((await call(session.GET, "/admin/session", { cookie })).status).toBe(401);
  });
});
