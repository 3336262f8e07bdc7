import { type SQL, and, asc, count, desc, eq, gt, gte, isNull, min, notInArray } from "drizzle-orm";
import type { Database } from "@/db/client";
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
export const UNAUTHENTICATED_ACTIONS = ["sign_in_failed"] as const;

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
