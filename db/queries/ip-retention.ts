import { sql, type SQL } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";
import { TERMINAL_REQUEST_STATUSES } from "@/lib/sponsorship/status";

/**
 * IP_RETENTION_DAYS (docs/deployment.md, "Personal data and how long it is kept"): past it, the personal data is
 * removed and the records stay.
 *
 * - A request that has ended (completed, rejected, failed) and was made more than N days ago loses `ip_address`,
 *   `user_agent` and `client_key`. An open request keeps them: its IP limits and the replay window read them.
 * - An administrator session that ended (expired or revoked) more than N days ago loses its IP and User-Agent.
 * - An administrator action older than N days (`sign_in_failed` ones come from anyone) loses `ip_address` and the
 *   User-Agent a sign-in keeps in `details`.
 * - An automatic block of an IP (its subject is a client identity, lib/sponsorship/client-identity.ts) that ended
 *   more than N days ago is deleted. Nothing reads an ended automatic block (the limits read only those not expired,
 *   the dashboard lists wallet blocks), its subject is all it says, and the subject is NOT NULL under checks: a row
 *   kept with a made-up subject would be a record of nothing.
 *
 * Each statement changes at most `batch` rows and commits on its own, so a first pass over a long history holds no
 * lock for long and writes no huge transaction; a pass repeats them until one changes fewer. Rows are claimed with
 * SKIP LOCKED, so passes of several processes at once share the work instead of waiting for each other, and a row
 * once cleared no longer matches: a pass repeated, or interrupted and run again, changes nothing twice. The cutoff is
 * the database's clock (as pruneBudgetCounts), so a web server whose clock is ahead removes nothing early. Partial
 * indexes (db/schema.ts, `*_personal_data_idx`) hold only the rows that still have data to remove, so a pass with
 * nothing to do reads nothing.
 */

/** Rows per statement. */
export const IP_RETENTION_BATCH = 10_000;

export type PersonalDataRemoved = {
  /** Requests whose IP address, client key and User-Agent were removed. */
  requests: number;
  adminSessions: number;
  adminActions: number;
  /** Ended automatic IP blocks deleted. */
  automaticIpBlocks: number;
};

const cutoff = (days: number): SQL => sql`now() - make_interval(days => ${days}::int)`;
const terminal = sql.raw(TERMINAL_REQUEST_STATUSES.map((status) => `'${status}'`).join(", "));

/** One batch of each kind; each answers how many rows it changed. */
const batches: Record<keyof PersonalDataRemoved, (days: number, batch: number) => SQL> = {
  requests: (days, batch) => sql`
    WITH due AS (
      SELECT r.id FROM sponsorship_requests r
      WHERE (r.ip_address IS NOT NULL OR r.user_agent IS NOT NULL OR r.client_key IS NOT NULL)
        AND r.requested_at < ${cutoff(days)}
        AND r.status IN (${terminal})
      ORDER BY r.requested_at
      LIMIT ${batch}
      FOR NO KEY UPDATE SKIP LOCKED
    ), done AS (
      UPDATE sponsorship_requests r SET ip_address = NULL, user_agent = NULL, client_key = NULL
      FROM due WHERE r.id = due.id
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM done`,
  adminSessions: (days, batch) => sql`
    WITH due AS (
      SELECT s.id FROM admin_sessions s
      WHERE (s.ip_address IS NOT NULL OR s.user_agent IS NOT NULL)
        AND (s.expires_at < ${cutoff(days)} OR s.revoked_at < ${cutoff(days)})
      LIMIT ${batch}
      FOR NO KEY UPDATE SKIP LOCKED
    ), done AS (
      UPDATE admin_sessions s SET ip_address = NULL, user_agent = NULL
      FROM due WHERE s.id = due.id
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM done`,
  adminActions: (days, batch) => sql`
    WITH due AS (
      SELECT a.id FROM admin_actions a
      WHERE (a.ip_address IS NOT NULL OR a.details ? 'userAgent')
        AND a.created_at < ${cutoff(days)}
      ORDER BY a.created_at
      LIMIT ${batch}
      FOR NO KEY UPDATE SKIP LOCKED
    ), done AS (
      UPDATE admin_actions a SET ip_address = NULL, details = a.details - 'userAgent'
      FROM due WHERE a.id = due.id
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM done`,
  // least() ignores a NULL lifted_at: a block ends when it expires, or earlier when it was lifted.
  automaticIpBlocks: (days, batch) => sql`
    WITH due AS (
      SELECT b.id FROM blocks b
      WHERE b.subject_type = 'ip' AND b.kind = 'automatic' AND least(b.expires_at, b.lifted_at) < ${cutoff(days)}
      LIMIT ${batch}
      FOR UPDATE SKIP LOCKED
    ), done AS (
      DELETE FROM blocks b USING due WHERE b.id = due.id
      RETURNING 1
    )
    SELECT count(*)::int AS n FROM done`,
};

/** One statement of one kind: at most `batch` rows changed; how many were. */
export async function removeExpiredPersonalDataBatch(db: Executor, kind: keyof PersonalDataRemoved, retentionDays: number, batch: number): Promise<number> {
  const rows = await run<{ n: number }>(db, batches[kind](retentionDays, batch));
  return rows[0]?.n ?? 0;
}

/**
 * One retention pass: every kind, batch after batch until a batch changes fewer than `batch` rows (or `signal` is
 * aborted: the web server's shutdown; the next pass goes on where this one stopped). `retentionDays` 0 keeps
 * everything and sends nothing.
 */
export async function removeExpiredPersonalData(
  db: Executor,
  options: { retentionDays: number; batch?: number; signal?: AbortSignal },
): Promise<PersonalDataRemoved> {
  const removed: PersonalDataRemoved = { requests: 0, adminSessions: 0, adminActions: 0, automaticIpBlocks: 0 };
  if (options.retentionDays <= 0) return removed;
  const batch = options.batch ?? IP_RETENTION_BATCH;
  for (const kind of Object.keys(removed) as (keyof PersonalDataRemoved)[]) {
    for (;;) {
      if (options.signal?.aborted) return removed;
      const n = await removeExpiredPersonalDataBatch(db, kind, options.retentionDays, batch);
      removed[kind] += n;
      if (n < batch) break;
    }
  }
  return removed;
}
