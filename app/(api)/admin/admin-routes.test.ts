import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminActions } from "@/db/schema";
import { parseConfig } from "@/lib/config";
import { setAppContextForTests } from "@/lib/http/app-context";
import { isWalletBlocked } from "@/lib/sponsorship/blocks";
import { CLIENT_IP_HEADER } from "@/lib/http/client-ip";
import { callRoute, resolveRoute } from "@/test/api-client";
import { createTestDatabase, type TestDatabase } from "@/test/db";

const ADMIN_TOKEN = "admin-routes-test-token-0123456789";
let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
  setAppContextForTests({ db: t.db, config: parseConfig({ ADMIN_TOKEN, LOG_LEVEL: "silent", CORS_ORIGINS: "https://app.example.test" }) });
});
afterAll(async () => {
  setAppContextForTests({});
  await t?.drop();
});

const address = () => `0x${randomBytes(20).toString("hex")}`;

/** A call routed through the route table generated from app/(api) (test/routes.generated.ts). */
function call(path: string, init: { method?: string; body?: unknown; cookie?: string; ip?: string; headers?: Record<string, string> } = {}) {
  return callRoute({
    path,
    method: init.method ?? "GET",
    body: init.body,
    ip: init.ip ?? "192.0.2.10",
    headers: { ...init.headers, ...(init.cookie ? { cookie: init.cookie } : {}) },
  });
}

async function signedInCookie(): Promise<string> {
  const response = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN } });
  expect(response.status).toBe(200);
  const setCookie = response.headers.get("set-cookie")!;
  return setCookie.split(";")[0]!;
}

describe("admin routes", () => {
  it("refuse an origin of CORS_ORIGINS (meant for the public API), so a page on the same site cannot resume sponsorships", async () => {
    const cookie = await signedInCookie();
    await call("/admin/pause", { method: "POST", body: { reason: "cors test" }, cookie });
    // A bodiless POST is a CORS "simple" request: no preflight; SameSite=Strict sends the cookie from the same site.
    const response = await call("/admin/resume", { method: "POST", cookie, headers: { origin: "https://app.example.test", host: "faucet.example.test" } });
    expect(response.status).toBe(403);
    expect(await response.json()).toMatchObject({ code: "origin_not_allowed" });
    expect((await call("/admin/overview", { cookie })).status).toBe(200);
    const [state] = await t.db.$client<{ paused: boolean }[]>`SELECT paused FROM service_state`;
    expect(state?.paused).toBe(true);
    // The public API still serves it, and the app's own origin still reaches the administrator's routes.
    expect((await callRoute({ path: "/health", headers: { origin: "https://app.example.test" } })).headers.get("access-control-allow-origin")).toBe(
      "https://app.example.test",
    );
    // Spelled so that only Next's decoding finds the route: still the administrator's route.
    const { module, params } = await resolveRoute("/admin/resume");
    const encoded = new Request("http://faucet.example.test/%61dmin/resume", {
      method: "POST",
      headers: { cookie, origin: "https://app.example.test", host: "faucet.example.test", [CLIENT_IP_HEADER]: "192.0.2.10" },
    });
    expect((await module.POST!(encoded, { params: Promise.resolve(params) })).status).toBe(403);
    const own = await call("/admin/resume", { method: "POST", cookie, headers: { origin: "https://faucet.example.test", host: "faucet.example.test" } });
    expect(own.status).toBe(200);
  });

  it("take an empty body sent as application/json as no body (resume: 200), and refuse one that is not JSON with 400 invalid_json", async () => {
    const cookie = await signedInCookie();
    const { module, params } = await resolveRoute("/admin/resume");
    const post = (body: string) =>
      module.POST!(
        new Request("http://localhost/admin/resume", {
          method: "POST",
          body,
          headers: { cookie, "content-type": "application/json", [CLIENT_IP_HEADER]: "192.0.2.10" },
        }),
        { params: Promise.resolve(params) },
      );
    // A client that types every POST as JSON: before, "The body is not valid JSON" for the body it did not send.
    expect((await post("")).status).toBe(200);
    const bad = await post("nope");
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { code: string }).code).toBe("invalid_json");
  });

  it("list the newest 500 active IP blocks with how many there are, and find older ones by the address or prefix they hold", async () => {
    const cookie = await signedInCookie();
    // 501 blocks, the oldest first: 10.0.0.0/24 is the one past the list.
    await t.db.$client`INSERT INTO ip_blocks (cidr, reason, created_by, created_at)
      SELECT ('10.' || (i / 256) || '.' || (i % 256) || '.0/24')::cidr, 'test: farm ' || i, 'admin:test', now() - (1000 - i) * interval '1 minute'
      FROM generate_series(0, 500) AS i`;
    type Listed = { items: { cidr: string }[]; total: number };
    const all = (await (await call("/admin/ip-blocks", { cookie })).json()) as Listed;
    expect(all.items).toHaveLength(500);
    expect(all.total).toBe(501);
    expect(all.items.map((b) => b.cidr)).not.toContain("10.0.0.0/24");
    // Before, the oldest could not be seen, nor lifted from the dashboard.
    const found = (await (await call("/admin/ip-blocks?overlapping=10.0.0.77", { cookie })).json()) as Listed;
    expect(found).toEqual({ items: [expect.objectContaining({ cidr: "10.0.0.0/24", reason: "test: farm 0" })], total: 1 });
    const within = (await (await call("/admin/ip-blocks?overlapping=10.1.0.0/16", { cookie })).json()) as Listed;
    expect(within.total).toBe(245);
    const bad = await call("/admin/ip-blocks?overlapping=not-an-address", { cookie });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { code: string }).code).toBe("invalid_value");
    await t.db.$client`DELETE FROM ip_blocks WHERE reason LIKE 'test: farm %'`;
  });

  it("answer 401 problem+json to every request without a session, and change nothing", async () => {
    const target = address();
    const cases: [string, { method?: string; body?: unknown }][] = [
      ["/admin/session", {}],
      ["/admin/overview", {}],
      ["/admin/requests", {}],
      ["/admin/requests/00000000-0000-0000-0000-000000000000", {}],
      [`/admin/wallets/${target}`, {}],
      [`/admin/wallets/${target}/block`, { method: "POST", body: { reason: "x" } }],
      [`/admin/wallets/${target}/unblock`, { method: "POST", body: { reason: "x" } }],
      ["/admin/sign-out", { method: "POST" }],
    ];
    for (const [path, init] of cases) {
      const response = await call(path, init);
      expect(response.status, path).toBe(401);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      const body = await response.json();
      expect(body).toMatchObject({ status: 401, code: "unauthorized", requestId: expect.any(String) });
      expect(JSON.stringify(body)).not.toContain(target.slice(2, 10));
    }
    // A forged cookie is no session either, nor a malformed one (a bad percent-escape is not a 500).
    const forged = await call("/admin/overview", { cookie: `admin_session=${"A".repeat(43)}` });
    expect(forged.status).toBe(401);
    for (const cookie of ["admin_session=%ZZ", "admin_session=%E0%A4%A"]) {
      const malformed = await call("/admin/overview", { cookie });
      expect(malformed.status, cookie).toBe(401);
      expect((await malformed.json()).code).toBe("unauthorized");
    }
    expect(await isWalletBlocked(t.db, target)).toBe(false);
  });

  it("makes the cookie Secure only when server.ts established https, never for a client-sent X-Forwarded-Proto", async () => {
    const forged = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, headers: { "x-forwarded-proto": "https" } });
    expect(forged.status).toBe(200);
    expect(forged.headers.get("set-cookie")).not.toContain("Secure");
    const https = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, headers: { "x-client-proto": "https" } });
    expect(https.headers.get("set-cookie")).toContain("; Secure");
  });

  it("names the cookie __Host-admin_session over https, which same-name cookies planted ahead cannot shadow", async () => {
    const https = { "x-client-proto": "https" };
    const signedIn = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, headers: https });
    const setCookie = signedIn.headers.get("set-cookie") ?? "";
    // The prefix's conditions: Secure, Path=/, no Domain (else a browser drops the cookie).
    expect(setCookie).toMatch(/^__Host-admin_session=[A-Za-z0-9_-]{43}; Path=\/; /);
    expect(setCookie).toContain("; Secure");
    expect(setCookie).not.toMatch(/domain=/i);
    const cookie = setCookie.split(";")[0]!;
    const planted = Array.from({ length: 4 }, (_, i) => `admin_session=${String.fromCharCode(65 + i).repeat(43)}`).join("; ");
    // Before, the session lived in admin_session, and a fourth cookie planted ahead of it locked the administrator out.
    expect((await call("/admin/session", { cookie: `${planted}; ${cookie}`, headers: https })).status).toBe(200);
    const out = await call("/admin/sign-out", { method: "POST", cookie, headers: https });
    expect(out.status).toBe(204);
    const cleared = out.headers.getSetCookie();
    expect(cleared.map((c) => c.split("=")[0])).toEqual(["__Host-admin_session", "admin_session"]);
    for (const c of cleared) expect(c).toMatch(/Max-Age=0; HttpOnly; SameSite=Strict; Secure$/);
    expect((await call("/admin/session", { cookie, headers: https })).status).toBe(401);
  });

  it("signs in with the token: an HttpOnly, SameSite=Strict session cookie that opens the admin routes", async () => {
    const response = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN } });
    const setCookie = response.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/^admin_session=[A-Za-z0-9_-]{43}; /);
    expect(setCookie).toContain("HttpOnly");
    expect(setCookie).toContain("SameSite=Strict");
    expect(setCookie).toContain("Path=/");
    expect(setCookie).not.toContain("Secure"); // plain http here; over https the cookie is Secure
    const cookie = setCookie.split(";")[0]!;
    const me = await call("/admin/session", { cookie });
    expect(me.status).toBe(200);
    const overviewResponse = await call("/admin/overview?range=1h", { cookie });
    expect(overviewResponse.status).toBe(200);
    expect(await overviewResponse.json()).toMatchObject({ range: "1h", treasury: { kind: "not_configured" } });
    // A range named like an Object.prototype member is an unknown range (the default), not a 500.
    for (const range of ["constructor", "toString", "__proto__", "hasOwnProperty"]) {
      const o = await call(`/admin/overview?range=${range}`, { cookie });
      expect(o.status, range).toBe(200);
      expect((await o.json()).range).toBe("24h");
      const r = await call(`/admin/requests?range=${range}`, { cookie });
      expect(r.status, range).toBe(200);
      expect((await r.json()).filters.range).toBe("all");
    }
    // A forged cursor with a date PostgreSQL cannot take (year 0, six digits) is ignored, not a 500.
    for (const iso of ["0000-01-01T00:00:00.000Z", "+275760-09-13T00:00:00.000Z"]) {
      const cursor = Buffer.from(`${iso}_00000000-0000-0000-0000-000000000000`).toString("base64url");
      for (const name of ["after", "before"]) {
        expect((await call(`/admin/requests?${name}=${cursor}`, { cookie })).status, `${name} ${iso}`).toBe(200);
      }
    }
  });

  it("finds the session behind a same-name cookie planted ahead of it (a longer path sends it first), trying at most three", async () => {
    const cookie = await signedInCookie();
    const planted = `admin_session=${"A".repeat(43)}`;
    // Before: the first cookie of the name alone was looked up, and the administrator was locked out.
    expect((await call("/admin/session", { cookie: `${planted}; ${cookie}` })).status).toBe(200);
    expect((await call("/admin/session", { cookie: `${planted}; ${planted}; ${planted}; ${cookie}` })).status).toBe(401);
  });

  it("refuses a wrong token with 401 and limits failed sign-ins per IP with 429 and Retry-After", async () => {
    const ip = "192.0.2.77";
    for (let i = 0; i < 5; i++) {
      const r = await call("/admin/sign-in", { method: "POST", body: { token: `wrong-${i}` }, ip });
      expect(r.status).toBe(401);
      expect((await r.json()).code).toBe("invalid_token");
    }
    const limited = await call("/admin/sign-in", { method: "POST", body: { token: ADMIN_TOKEN }, ip });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await limited.json()).code).toBe("rate_limited");
  });

  it("blocks and unblocks a wallet with a reason, audited with the session", async () => {
    const cookie = await signedInCookie();
    const target = address();
    const blocked = await call(`/admin/wallets/${target}/block`, {
      method: "POST",
      body: { reason: "spam campaign" },
      cookie,
    });
    expect(blocked.status).toBe(201);
    expect(await isWalletBlocked(t.db, target)).toBe(true);
    const noReason = await call(`/admin/wallets/${target}/block`, { method: "POST", body: {}, cookie });
    expect(noReason.status).toBe(422);
    // A NUL in the reason (PostgreSQL text cannot hold it) is a 422, not a 500.
    for (const action of ["block", "unblock"]) {
      const nul = await call(`/admin/wallets/${target}/${action}`, { method: "POST", body: { reason: "a\u0000b" }, cookie });
      expect(nul.status).toBe(422);
      expect((await nul.json()).code).toBe("invalid_value");
    }
    const lifted = await call(`/admin/wallets/${target}/unblock`, {
      method: "POST",
      body: { reason: "false positive" },
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
    const out = await call("/admin/sign-out", { method: "POST", cookie });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/^admin_session=; .*Max-Age=0/);
    expect((await call("/admin/session", { cookie })).status).toBe(401);
  });
});
