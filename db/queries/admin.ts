import { type SQL, and, asc, count, desc, eq, gt, gte, isNull, lte, min, notInArray } from "drizzle-orm";
import type { Database } from "@/db/client";
import { lockKeys } from "@/db/sql/advisory-locks";
import type { Executor } from "@/db/sql/run";
import { adminActions, adminSessions, rateLimitHits, type AdminAction, type AdminSession, type RateLimitScope } from "@/db/schema";

/** Administration: sessions, the audit log of administrator actions, and the sign-in attempt counter. */

export async function insertAdminSession(
  db: Database,
  values: { tokenHash: string; credential: string; expiresAt: Date; ipAddress: string | null; userAgent: string | null },
): Promise<AdminSession> {
  const [row] = await db.insert(adminSessions).values(values).returning();
  if (!row) throw new Error("insert into admin_sessions returned no row");
  return row;
}

/**
 * The session whose secret hashes to `tokenHash`, if it was opened with the credential of that fingerprint and is
 * neither revoked nor expired at `now`.
 */
export async function findActiveAdminSession(db: Database, tokenHash: string, credential: string, now: Date): Promise<AdminSession | undefined> {
  const [row] = await db
    .select()
    .from(adminSessions)
    .where(
      and(eq(adminSessions.tokenHash, tokenHash), eq(adminSessions.credential, credential), isNull(adminSessions.revokedAt), gt(adminSessions.expiresAt, now)),
    )
    .limit(1);
  return row;
}

/** Revokes a session; true when it was active. */
export async function revokeAdminSession(db: Database, sessionId: string, now: Date): Promise<boolean> {
  const rows = await db
    .update(adminSessions)
    .set({ revokedAt: now })
    .where(and(eq(adminSessions.id, sessionId), isNull(adminSessions.revokedAt)))
    .returning({ id: adminSessions.id });
  return rows.length > 0;
}

export type NewAdminActionValues = {
  action: string;
  subject?: string | null;
  reason?: string | null;
  sessionId?: string | null;
  ipAddress?: string | null;
  details?: Record<string, unknown>;
  createdAt?: Date;
};

export async function insertAdminAction(db: Executor, values: NewAdminActionValues): Promise<AdminAction> {
  const [row] = await db
    .insert(adminActions)
    .values({
      action: values.action,
      subject: values.subject ?? null,
      reason: values.reason ?? null,
      sessionId: values.sessionId ?? null,
      ipAddress: values.ipAddress ?? null,
      details: values.details ?? {},
      ...(values.createdAt ? { createdAt: values.createdAt } : {}),
    })
    .returning();
  if (!row) throw new Error("insert into admin_actions returned no row");
  return row;
}

/**
 * Actions anyone on the internet can cause (a wrong token at the sign-in or `/metrics`): left out of the overview's
 * list of operator actions, so a stream of guesses cannot push a pause or a block out of sight.
 */
export const UNAUTHENTICATED_ACTIONS = ["sign_in_failed", "sign_in_failures_counted"] as const;

/**
 * Audits one wrong administrator token, within a service-wide ceiling: while fewer than `maxAudited` failures were
 * audited one by one within the window (`since` to `until`, the sign-in's own time), this one gets its own
 * `sign_in_failed` row (IP, reason, details); past that, it is counted in one `sign_in_failures_counted` row per
 * window (`details.count`, no IP), so guesses spread over many client identities (an IPv6 /48 holds 65,536 /64s, each
 * with its own sign-in limit) cannot write rows without bound. One advisory lock serialises the check and the write:
 * the ceiling is exact, and each window has one counting row. Answers `counted` with the counting row's total when
 * the ceiling had been reached.
 */
export async function auditSignInFailure(
  db: Database,
  values: { reason: string; ipAddress: string; details: Record<string, unknown>; createdAt: Date },
  window: { since: Date; until: Date; maxAudited: number },
): Promise<{ kind: "audited" } | { kind: "counted"; count: number }> {
  return db.transaction(async (tx) => {
    await lockKeys(tx, ["admin_actions:sign_in_failed"]);
    const [audited] = await tx.select({ n: count() }).from(
      tx
        .select({ one: adminActions.id })
        .from(adminActions)
        .where(and(eq(adminActions.action, "sign_in_failed"), gte(adminActions.createdAt, window.since), lte(adminActions.createdAt, window.until)))
        .limit(window.maxAudited)
        .as("recent"),
    );
    if ((audited?.n ?? 0) < window.maxAudited) {
      await insertAdminAction(tx, { action: "sign_in_failed", ...values });
      return { kind: "audited" as const };
    }
    const [current] = await tx
      .select({ id: adminActions.id, details: adminActions.details })
      .from(adminActions)
      .where(and(eq(adminActions.action, "sign_in_failures_counted"), gte(adminActions.createdAt, window.since), lte(adminActions.createdAt, window.until)))
      .orderBy(desc(adminActions.createdAt), desc(adminActions.id))
      .limit(1);
    if (current) {
      const total = Number(current.details.count ?? 0) + 1;
      await tx
        .update(adminActions)
        .set({ details: { ...current.details, count: total, lastAt: values.createdAt.toISOString() } })
        .where(eq(adminActions.id, current.id));
      return { kind: "counted" as const, count: total };
    }
    await insertAdminAction(tx, {
      action: "sign_in_failures_counted",
      reason: `wrong administrator tokens past the audit's ceiling of ${window.maxAudited} per window, counted without their IPs`,
      details: { count: 1, lastAt: values.createdAt.toISOString() },
      createdAt: values.createdAt,
    });
    return { kind: "counted" as const, count: 1 };
  });
}

/**
 * The latest administrator actions, newest first; optionally only those about one subject, or only the operators'
 * own (`operatorsOnly`: without UNAUTHENTICATED_ACTIONS).
 */
export async function listAdminActions(db: Database, options: { subject?: string; limit?: number; operatorsOnly?: boolean } = {}): Promise<AdminAction[]> {
  const where: SQL | undefined = and(
    options.subject ? eq(adminActions.subject, options.subject) : undefined,
    options.operatorsOnly ? notInArray(adminActions.action, [...UNAUTHENTICATED_ACTIONS]) : undefined,
  );
  return db
    .select()
    .from(adminActions)
    .where(where)
    .orderBy(desc(adminActions.createdAt), desc(adminActions.id))
    .limit(options.limit ?? 50);
}

/* --------------------------------------------------------- attempt counter */

/** Records one hit and returns its id. */
export async function insertRateLimitHit(db: Database, scope: RateLimitScope, key: string, at: Date): Promise<number> {
  const [row] = await db.insert(rateLimitHits).values({ scope, key, createdAt: at }).returning({ id: rateLimitHits.id });
  if (!row) throw new Error("insert into rate_limit_hits returned no row");
  return row.id;
}

export async function deleteRateLimitHit(db: Database, id: number): Promise<void> {
  await db.delete(rateLimitHits).where(eq(rateLimitHits.id, id));
}

/** Hits of `scope`/`key` since `since`, and the oldest of them (when the window frees its first slot). */
export async function countRateLimitHits(db: Database, scope: RateLimitScope, key: string, since: Date): Promise<{ count: number; oldest: Date | null }> {
  const [row] = await db
    .select({ count: count(), oldest: min(rateLimitHits.createdAt) })
    .from(rateLimitHits)
    .where(and(eq(rateLimitHits.scope, scope), eq(rateLimitHits.key, key), gte(rateLimitHits.createdAt, since)));
  return { count: row?.count ?? 0, oldest: row?.oldest ?? null };
}

/** The `n`-th oldest hit (1-based) of `scope`/`key` since `since`: when the window has room again. */
export async function nthRateLimitHitSince(db: Database, scope: RateLimitScope, key: string, since: Date, n: number): Promise<Date | null> {
  const [row] = await db
    .select({ createdAt: rateLimitHits.createdAt })
    .from(rateLimitHits)
    .where(and(eq(rateLimitHits.scope, scope), eq(rateLimitHits.key, key), gte(rateLimitHits.createdAt, since)))
    .orderBy(asc(rateLimitHits.createdAt), asc(rateLimitHits.id))
    .offset(Math.max(0, n - 1))
    .limit(1);
  return row?.createdAt ?? null;
}
