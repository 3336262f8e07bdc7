import type { Database } from "@/db/client";
import {
  auditSignInFailure,
  countRateLimitHits,
  deleteRateLimitHit,
  findActiveAdminSession,
  insertAdminAction,
  insertAdminSession,
  insertRateLimitHit,
  nthRateLimitHitSince,
  revokeAdminSession,
} from "@/db/queries/admin";
import type { AdminSession } from "@/db/schema";
import { createLogger } from "@/lib/log";
import { clientIdentity } from "@/lib/sponsorship/client-identity";
import { retryAfterSeconds } from "@/lib/sponsorship/rate-limits";
import { generateSessionSecret, isWellFormedSessionSecret, sessionCredential, sha256Hex, tokensMatch } from "./secrets";

/**
 * Administrator sessions (decisions.md, "Dashboard and administration"): sign-in with ADMIN_TOKEN, a session
 * whose secret lives only in an HttpOnly SameSite=Strict cookie (the database keeps its SHA-256), sign-out.
 * Failed sign-ins are limited per client identity (an IPv4 address, or an IPv6 client's prefix: client-identity.ts)
 * through `rate_limit_hits` (scope `admin_sign_in`).
 * Everything here is plain functions over the database, so it is tested without a browser.
 */

const logger = createLogger({ component: "admin" });

export const ADMIN_SESSION_COOKIE = "admin_session";
/**
 * The session cookie's name over HTTPS. A browser keeps a cookie of a `__Host-` name only when a secure origin set it
 * with Secure, Path=/ and no Domain, so neither a sibling subdomain nor a tampered plain-http answer can plant or
 * shadow one; over plain http (local use) the cookie is `admin_session`.
 */
export const SECURE_ADMIN_SESSION_COOKIE = "__Host-admin_session";

/** The name the session cookie is set under: `__Host-admin_session` over HTTPS, else `admin_session`. */
export function sessionCookieName(secure: boolean): string {
  return secure ? SECURE_ADMIN_SESSION_COOKIE : ADMIN_SESSION_COOKIE;
}

/** The names a sign-out clears: over HTTPS both (a session opened before the cookie had the prefix too). */
export function sessionCookieNamesToClear(secure: boolean): string[] {
  return secure ? [SECURE_ADMIN_SESSION_COOKIE, ADMIN_SESSION_COOKIE] : [ADMIN_SESSION_COOKIE];
}
/** A session lasts a working day; signing in again is cheap. */
export const ADMIN_SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/**
 * The dashboard's query after a sign-out that cleared the cookie but may not have ended the session on the server
 * (the database was unreachable): `/dashboard?signed-out=database-unreachable` says so above the sign-in form.
 */
export const SIGNED_OUT_LOCALLY = { param: "signed-out", value: "database-unreachable" } as const;

export type SignInLimits = {
  /** Failed sign-ins allowed per client identity (an IPv4 address, an IPv6 client's prefix) within `windowMs`. */
  maxFailures: number;
  /** Failures audited one by one (with their IP) within `windowMs`, service-wide; past it they are only counted. */
  maxAuditedFailures: number;
  windowMs: number;
};
/**
 * Five wrong tokens per client per 15 minutes, on the sign-in and `/metrics` together. ADMIN_TOKEN has at least 32
 * varied characters (lib/config.ts): that is what stops guessing, and this only slows it. There is deliberately no
 * limit across clients (a service-wide one, or one per IPv6 /48): it would let anyone in the administrator's network,
 * or anyone at all, keep the right token out. What guesses from many clients could grow without bound, the audit's
 * rows, has its ceiling instead (maxAuditedFailures).
 */
export const DEFAULT_SIGN_IN_LIMITS: SignInLimits = { maxFailures: 5, maxAuditedFailures: 100, windowMs: 15 * 60 * 1000 };

export type SignInInput = {
  /** What the administrator typed. */
  token: string;
  /** The configured ADMIN_TOKEN; undefined refuses every sign-in. */
  adminToken: string | undefined;
  ipAddress: string;
  /** IPV6_PREFIX_LENGTH: the limiter counts an IPv6 client by this prefix (default 64, the configuration's). */
  ipv6PrefixLength?: number;
  userAgent: string | null;
  now?: Date;
  limits?: SignInLimits;
};

export type SignInResult =
  | { kind: "signed_in"; session: AdminSession; secret: string; expiresAt: Date }
  | { kind: "invalid_token" }
  | { kind: "rate_limited"; retryAfterSeconds: number }
  | { kind: "not_configured" };

/** Where an administrator token was presented: the sign-in form/route, or `GET /metrics`'s bearer credential. */
export type AdminTokenChannel = "sign_in" | "metrics";

export type TokenCheckInput = Omit<SignInInput, "adminToken"> & { adminToken: string; channel?: AdminTokenChannel };

export type TokenCheckResult = { kind: "valid" } | { kind: "invalid_token" } | { kind: "rate_limited"; retryAfterSeconds: number };

/**
 * The sign-in limiter and audit, for every place that accepts ADMIN_TOKEN (issue 11, item 4: `/metrics` bearer
 * guesses share it): failures are counted per client in `rate_limit_hits` (scope `admin_sign_in`), past the limit
 * the answer is `rate_limited` without even comparing, and each wrong token is audited (`sign_in_failed`, with
 * the channel in `details`). A right token leaves the counter as it was.
 */
export async function verifyAdministratorToken(db: Database, input: TokenCheckInput): Promise<TokenCheckResult> {
  const now = input.now ?? new Date();
  const limits = input.limits ?? DEFAULT_SIGN_IN_LIMITS;
  const channel = input.channel ?? "sign_in";

  const limiterKey = clientIdentity(input.ipAddress, input.ipv6PrefixLength ?? 64);
  // Count this attempt first, then look at the window: concurrent guesses cannot all slip under the limit.
  const since = new Date(now.getTime() - limits.windowMs);
  const hitId = await insertRateLimitHit(db, "admin_sign_in", limiterKey, now);
  const { count } = await countRateLimitHits(db, "admin_sign_in", limiterKey, since);
  if (count > limits.maxFailures) {
    // A refused attempt is not a failure: it does not extend the lock-out.
    await deleteRateLimitHit(db, hitId);
    // Room again once the (count - max)-th oldest remaining failure leaves the window.
    const freedAt = await nthRateLimitHitSince(db, "admin_sign_in", limiterKey, since, count - limits.maxFailures);
    const retryAfterMs = freedAt ? freedAt.getTime() + limits.windowMs - now.getTime() : limits.windowMs;
    logger.warn("administrator sign-in rate limited", { ip: input.ipAddress, channel });
    return { kind: "rate_limited", retryAfterSeconds: retryAfterSeconds(retryAfterMs) };
  }

  if (!tokensMatch(input.token, input.adminToken)) {
    const audit = await auditSignInFailure(
      db,
      {
        ipAddress: input.ipAddress,
        reason: channel === "metrics" ? "wrong administrator token (GET /metrics bearer)" : "wrong administrator token",
        details: { userAgent: input.userAgent, channel },
        createdAt: now,
      },
      { since, until: now, maxAudited: limits.maxAuditedFailures },
    );
    if (audit.kind === "audited") logger.warn("administrator sign-in failed", { ip: input.ipAddress, channel });
    // Past the audit's ceiling the log is told once per window, not once per guess.
    else if (audit.count === 1)
      logger.error("wrong administrator tokens are arriving faster than they are audited; counting them without their IPs", {
        ceiling: limits.maxAuditedFailures,
        windowMs: limits.windowMs,
      });
    return { kind: "invalid_token" };
  }

  // A success is not a failure: it leaves the counter as it was.
  await deleteRateLimitHit(db, hitId);
  return { kind: "valid" };
}

export async function signInAdministrator(db: Database, input: SignInInput): Promise<SignInResult> {
  const now = input.now ?? new Date();
  if (!input.adminToken) {
    logger.warn("administrator sign-in refused: ADMIN_TOKEN is not configured", { ip: input.ipAddress });
    return { kind: "not_configured" };
  }
  const checked = await verifyAdministratorToken(db, { ...input, adminToken: input.adminToken, now, channel: "sign_in" });
  if (checked.kind !== "valid") return checked;

  const secret = generateSessionSecret();
  const expiresAt = new Date(now.getTime() + ADMIN_SESSION_TTL_MS);
  const session = await insertAdminSession(db, {
    tokenHash: sha256Hex(secret),
    credential: sessionCredential(input.adminToken, secret),
    expiresAt,
    ipAddress: input.ipAddress,
    userAgent: input.userAgent,
  });
  await insertAdminAction(db, {
    action: "sign_in",
    sessionId: session.id,
    ipAddress: input.ipAddress,
    details: { userAgent: input.userAgent },
    createdAt: now,
  });
  logger.info("administrator signed in", { sessionId: session.id, ip: input.ipAddress });
  return { kind: "signed_in", session, secret, expiresAt };
}

/** At most this many session cookies of one request are looked up (each is a database read). */
export const MAX_SESSION_COOKIES_TRIED = 3;

/**
 * The active session for a cookie value, or null (absent, malformed, unknown, revoked, expired, or opened with
 * another ADMIN_TOKEN than `adminToken`, the configured one: changing or unsetting it ends every session). Given
 * every session cookie a request sent (lib/admin/http.ts sessionCookieValues), the first that is a live session: a
 * cookie of the same name planted on a longer path (by a sibling subdomain, or an http response tampered with on the
 * way) comes first in the header, and read alone it locked the administrator out.
 */
export async function authenticateAdminSession(
  db: Database,
  secret: string | readonly string[] | undefined,
  adminToken: string | undefined,
  now: Date = new Date(),
): Promise<AdminSession | null> {
  if (!adminToken) return null;
  const secrets = (typeof secret === "string" ? [secret] : (secret ?? [])).filter(isWellFormedSessionSecret).slice(0, MAX_SESSION_COOKIES_TRIED);
  for (const candidate of secrets) {
    const session = await findActiveAdminSession(db, sha256Hex(candidate), sessionCredential(adminToken, candidate), now);
    if (session) return session;
  }
  return null;
}

export async function signOutAdministrator(db: Database, session: AdminSession, context: { ipAddress: string | null; now?: Date }): Promise<void> {
  const now = context.now ?? new Date();
  const revoked = await revokeAdminSession(db, session.id, now);
  if (revoked) {
    await insertAdminAction(db, { action: "sign_out", sessionId: session.id, ipAddress: context.ipAddress, createdAt: now });
    logger.info("administrator signed out", { sessionId: session.id });
  }
}

/** How the session cookie is set (under sessionCookieName): HttpOnly, SameSite=Strict, whole site, Secure over HTTPS. */
export function sessionCookieOptions(expiresAt: Date, secure: boolean) {
  return {
    httpOnly: true,
    sameSite: "strict" as const,
    path: "/",
    secure,
    expires: expiresAt,
  };
}

/** The actor recorded on blocks and status changes made by a session. */
export function adminActor(session: Pick<AdminSession, "id">): string {
  return `admin:${session.id}`;
}
