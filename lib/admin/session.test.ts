import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminActions, adminSessions } from "@/db/schema";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { sessionCredential, sha256Hex, tokensMatch } from "./secrets";
import { authenticateAdminSession, DEFAULT_SIGN_IN_LIMITS, signInAdministrator, signOutAdministrator } from "./session";

const ADMIN_TOKEN = "correct-horse-battery-staple-42";
let t: TestDatabase;
let ipCounter = 0;
/** Each test signs in from its own IP, so the per-IP counter of one test never meets another's. */
const freshIp = () => `198.51.100.${++ipCounter}`;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

describe("administrator sign-in", () => {
  it("compares tokens by digest, so equal tokens match and any difference does not", () => {
    expect(tokensMatch(ADMIN_TOKEN, ADMIN_TOKEN)).toBe(true);
    expect(tokensMatch(ADMIN_TOKEN.slice(0, -1), ADMIN_TOKEN)).toBe(false);
    expect(tokensMatch("", ADMIN_TOKEN)).toBe(false);
    expect(tokensMatch(ADMIN_TOKEN + "x", ADMIN_TOKEN)).toBe(false);
  });

  it("opens a session with the right token and stores only the SHA-256 of its secret", async () => {
    const result = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: freshIp(), userAgent: "test" });
    if (result.kind !== "signed_in") throw new Error(`expected signed_in, got ${result.kind}`);
    const [row] = await t.db.select().from(adminSessions).where(eq(adminSessions.id, result.session.id));
    expect(row?.tokenHash).toBe(sha256Hex(result.secret));
    expect(row?.tokenHash).not.toContain(result.secret);
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN)).toMatchObject({ id: result.session.id });
    const audit = await t.db.select().from(adminActions).where(eq(adminActions.sessionId, result.session.id));
    expect(audit.map((a) => a.action)).toEqual(["sign_in"]);
  });

  it("refuses every sign-in when ADMIN_TOKEN is not configured", async () => {
    const result = await signInAdministrator(t.db, { token: "", adminToken: undefined, ipAddress: freshIp(), userAgent: null });
    expect(result.kind).toBe("not_configured");
  });

  it("refuses a wrong token and audits the failure with the client IP", async () => {
    const ip = freshIp();
    const result = await signInAdministrator(t.db, { token: "wrong-token-0000000000", adminToken: ADMIN_TOKEN, ipAddress: ip, userAgent: null });
    expect(result.kind).toBe("invalid_token");
    const audit = await t.db.select().from(adminActions).where(eq(adminActions.ipAddress, ip));
    expect(audit.map((a) => [a.action, a.reason])).toEqual([["sign_in_failed", "wrong administrator token"]]);
  });

  it("rate limits failed sign-ins per IP, even with the right token, and tells when to retry", async () => {
    const ip = freshIp();
    const limits = { ...DEFAULT_SIGN_IN_LIMITS, maxFailures: 3, windowMs: 60_000 };
    const start = new Date("2026-01-01T10:00:00.000Z");
    for (let i = 0; i < 3; i++) {
      const r = await signInAdministrator(t.db, {
        token: `wrong-${i}`,
        adminToken: ADMIN_TOKEN,
        ipAddress: ip,
        userAgent: null,
        now: new Date(start.getTime() + i * 1000),
        limits,
      });
      expect(r.kind).toBe("invalid_token");
    }
    const at = new Date(start.getTime() + 10_000);
    const refused = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: ip, userAgent: null, now: at, limits });
    // The oldest failure (at start) leaves the window at start + 60 s, 50 s from now.
    expect(refused).toEqual({ kind: "rate_limited", retryAfterSeconds: 50 });

    // Another IP is not affected.
    const other = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: freshIp(), userAgent: null, now: at, limits });
    expect(other.kind).toBe("signed_in");

    // Refused attempts do not extend the lock-out: once the oldest failure has left the window, it opens again.
    const later = new Date(start.getTime() + 60_001);
    const again = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: ip, userAgent: null, now: later, limits });
    expect(again.kind).toBe("signed_in");
  });

  it("counts failed sign-ins from one IPv6 /64 together, whatever addresses they come from", async () => {
    const limits = { ...DEFAULT_SIGN_IN_LIMITS, maxFailures: 3, windowMs: 60_000 };
    const now = new Date("2026-01-02T10:00:00.000Z");
    const signIn = (token: string, ipAddress: string) => signInAdministrator(t.db, { token, adminToken: ADMIN_TOKEN, ipAddress, userAgent: null, now, limits });
    for (const ip of ["2001:db8:99:1::1", "2001:db8:99:1::2", "2001:db8:99:1:ffff:ffff:ffff:ffff"])
      expect((await signIn("wrong", ip)).kind).toBe("invalid_token");
    expect((await signIn(ADMIN_TOKEN, "2001:db8:99:1::abcd")).kind).toBe("rate_limited");
    expect((await signIn(ADMIN_TOKEN, "2001:db8:99:2::1")).kind).toBe("signed_in");
  });

  it("audits failures one by one up to a service-wide ceiling per window, then counts them in one row without IPs", async () => {
    const own = await createTestDatabase();
    try {
      const limits = { ...DEFAULT_SIGN_IN_LIMITS, maxAuditedFailures: 3, windowMs: 60_000 };
      const start = new Date("2026-01-04T10:00:00.000Z");
      const at = (s: number) => new Date(start.getTime() + s * 1000);
      const guess = (i: number, now: Date) =>
        signInAdministrator(own.db, { token: `guess-${i}`, adminToken: ADMIN_TOKEN, ipAddress: `2001:db8:${i}::1`, userAgent: "bot", now, limits });
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => guess(i + 1, at(0))));
      expect(results.every((r) => r.kind === "invalid_token")).toBe(true);
      const rows = await own.db.select().from(adminActions).orderBy(adminActions.id);
      expect(rows.filter((r) => r.action === "sign_in_failed")).toHaveLength(3);
      const counted = rows.filter((r) => r.action === "sign_in_failures_counted");
      expect(counted).toHaveLength(1);
      expect(counted[0]).toMatchObject({ ipAddress: null, details: { count: 5 } });
      expect(JSON.stringify(counted[0])).not.toContain("2001:db8");
      // A window later, failures are audited one by one again, and a new window counts in a new row.
      for (let i = 0; i < 4; i++) await guess(20 + i, at(120 + i));
      const later = await own.db.select().from(adminActions).orderBy(adminActions.id);
      expect(later.filter((r) => r.action === "sign_in_failed")).toHaveLength(6);
      expect(later.filter((r) => r.action === "sign_in_failures_counted").map((r) => r.details.count)).toEqual([5, 1]);
    } finally {
      await own.drop();
    }
  });

  it("does not let concurrent guesses slip past the limit", async () => {
    const ip = freshIp();
    const limits = { ...DEFAULT_SIGN_IN_LIMITS, maxFailures: 3, windowMs: 60_000 };
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => signInAdministrator(t.db, { token: `guess-${i}`, adminToken: ADMIN_TOKEN, ipAddress: ip, userAgent: null, limits })),
    );
    expect(results.filter((r) => r.kind === "invalid_token").length).toBeLessThanOrEqual(3);
    expect(results.filter((r) => r.kind === "rate_limited").length).toBeGreaterThanOrEqual(9);
  });
});

describe("administrator sessions", () => {
  it("ignores absent, malformed and unknown cookie values", async () => {
    expect(await authenticateAdminSession(t.db, undefined, ADMIN_TOKEN)).toBeNull();
    expect(await authenticateAdminSession(t.db, "not a secret", ADMIN_TOKEN)).toBeNull();
    expect(await authenticateAdminSession(t.db, "A".repeat(43), ADMIN_TOKEN)).toBeNull();
  });

  it("ends every session when ADMIN_TOKEN changes or is unset, and keeps no token in the session's row", async () => {
    const result = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: freshIp(), userAgent: null });
    if (result.kind !== "signed_in") throw new Error(result.kind);
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN)).not.toBeNull();
    // The token rotated after a leak: the sessions it opened are over.
    expect(await authenticateAdminSession(t.db, result.secret, `${ADMIN_TOKEN}-rotated`)).toBeNull();
    expect(await authenticateAdminSession(t.db, result.secret, undefined)).toBeNull();
    const [row] = await t.db.select().from(adminSessions).where(eq(adminSessions.id, result.session.id));
    expect(row?.credential).toBe(sessionCredential(ADMIN_TOKEN, result.secret));
    expect(JSON.stringify(row)).not.toContain(ADMIN_TOKEN);
    // Put back, the token admits its sessions again (they were not revoked).
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN)).not.toBeNull();
  });

  it("refuses a session from before the credential was recorded", async () => {
    const result = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: freshIp(), userAgent: null });
    if (result.kind !== "signed_in") throw new Error(result.kind);
    await t.db.update(adminSessions).set({ credential: null }).where(eq(adminSessions.id, result.session.id));
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN)).toBeNull();
  });

  it("ends a session at its expiry", async () => {
    const now = new Date("2026-01-01T00:00:00.000Z");
    const result = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: freshIp(), userAgent: null, now });
    if (result.kind !== "signed_in") throw new Error(result.kind);
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN, new Date(result.expiresAt.getTime() - 1))).not.toBeNull();
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN, result.expiresAt)).toBeNull();
  });

  it("signs out: the session no longer authenticates and the sign-out is audited", async () => {
    const ip = freshIp();
    const result = await signInAdministrator(t.db, { token: ADMIN_TOKEN, adminToken: ADMIN_TOKEN, ipAddress: ip, userAgent: null });
    if (result.kind !== "signed_in") throw new Error(result.kind);
    await signOutAdministrator(t.db, result.session, { ipAddress: ip });
    expect(await authenticateAdminSession(t.db, result.secret, ADMIN_TOKEN)).toBeNull();
    const audit = await t.db.select().from(adminActions).where(eq(adminActions.sessionId, result.session.id));
    expect(audit.map((a) => a.action).sort()).toEqual(["sign_in", "sign_out"]);
  });
});
