import { sql, type SQL } from "drizzle-orm";
import type { BlockSubject, EligibilityReason, RequestStatus } from "@/db/schema";
import type { Database } from "@/db/client";
import { lockKeysSql } from "./advisory-locks";
import type { Executor } from "./executor";
import { insertHitsSql, limitReachedAtMs } from "./rate-limits";
import { blockActive, isoUtc, ts } from "./sql-helpers";
import { queryPrepared } from "./prepared";
import { twoStepTransaction } from "./two-step-transaction";

/* ------------------------------------------------------------------ views */

/** A request as POST /sponsorship/request shows it, timestamps in the wire format. */
export type RequestView = {
  id: string;
  walletId: string;
  walletAddress: string;
  status: RequestStatus;
  requestedAt: string;
  approvedAt: string | null;
  rejectedAt: string | null;
  completedAt: string | null;
  failedAt: string | null;
  ipAddress: string;
  userAgent: string | null;
  eligibilityReason: EligibilityReason | null;
};

export type RelaySummaryView = {
  id: string;
  status: "queued" | "submitted" | "confirmed" | "failed";
  relayAttempt: number;
  transactionHash: string | null;
  submittedAt: string | null;
  confirmedAt: string | null;
  failedAt: string | null;
  failureReason: string | null;
};

/** A request with its wallet and relay attempts (GET /sponsorship/:id, GET /sponsorship/tx/:hash). */
export type RequestDetailView = RequestView & {
  wallet: { id: string; walletAddress: string; sponsorshipCount: number; isBlocked: boolean };
  relayTransactions: RelaySummaryView[];
};

/** The fields of a RequestView and their expressions over `sponsorship_requests r`. */
const requestViewFields: [keyof RequestView, SQL][] = [
  ["id", sql`r.id`],
  ["walletId", sql`r.wallet_id`],
  ["walletAddress", sql`r.wallet_address`],
  ["status", sql`r.status`],
  ["requestedAt", isoUtc(sql`r.requested_at`)],
  ["approvedAt", isoUtc(sql`r.approved_at`)],
  ["rejectedAt", isoUtc(sql`r.rejected_at`)],
  ["completedAt", isoUtc(sql`r.completed_at`)],
  ["failedAt", isoUtc(sql`r.failed_at`)],
  ["ipAddress", sql`r.ip_address`],
  ["userAgent", sql`r.user_agent`],
  ["eligibilityReason", sql`r.eligibility_reason`],
];

const requestViewColumns = sql.join(
  requestViewFields.map(([name, expression]) => sql`${expression} AS ${sql.identifier(name)}`),
  sql`, `,
);

/** One round trip: the request, its wallet (with the blocked flag) and its relay attempts. */
function detailQuery(where: SQL, now: Date): SQL {
  return sql`
    SELECT ${requestViewColumns},
      json_build_object(
        'id', w.id,
        'walletAddress', w.wallet_address,
        'sponsorshipCount', w.sponsorship_count,
        'isBlocked', EXISTS (
          SELECT 1 FROM blocks b WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address AND ${blockActive("b", now)}
        )
      ) AS wallet,
      COALESCE((
        SELECT json_agg(json_build_object(
          'id', t.id,
          'status', t.status,
          'relayAttempt', t.relay_attempt,
          'transactionHash', t.transaction_hash,
          'submittedAt', ${isoUtc(sql`t.submitted_at`)},
          'confirmedAt', ${isoUtc(sql`t.confirmed_at`)},
          'failedAt', ${isoUtc(sql`t.failed_at`)},
          'failureReason', t.failure_reason
        ) ORDER BY t.relay_attempt)
        FROM relay_transactions t WHERE t.sponsorship_request_id = r.id
      ), '[]'::json) AS "relayTransactions"
    FROM sponsorship_requests r
    JOIN wallets w ON w.id = r.wallet_id
    WHERE ${where}`;
}

export async function findRequestDetail(db: Executor, id: string, now: Date): Promise<RequestDetailView | undefined> {
  const rows = await queryPrepared<RequestDetailView>(db, detailQuery(sql`r.id = ${id}`, now));
  return rows[0];
}

/** The request that owns the relay transaction with this hash (stored lowercase). */
export async function findRequestDetailByTransactionHash(db: Executor, hash: string, now: Date): Promise<RequestDetailView | undefined> {
  const rows = await queryPrepared<RequestDetailView>(db, 
    detailQuery(sql`r.id = (SELECT t.sponsorship_request_id FROM relay_transactions t WHERE t.transaction_hash = ${hash.toLowerCase()})`, now),
  );
  return rows[0];
}

/* ---------------------------------------------------------------- history */

export type HistoryItemView = Pick<
  RequestView,
  "id" | "walletId" | "status" | "requestedAt" | "approvedAt" | "completedAt" | "failedAt" | "rejectedAt"
>;

/** The wallet's id and whether `cursor` is one of its requests (undefined when the wallet is not registered). */
export async function findHistoryAnchor(
  db: Executor,
  address: string,
  cursor: string | undefined,
): Promise<{ walletId: string; cursorValid: boolean } | undefined> {
  const rows = await queryPrepared<{ walletId: string; cursorValid: boolean }>(db, sql`
    SELECT w.id AS "walletId",
      ${cursor === undefined ? sql`true` : sql`EXISTS (SELECT 1 FROM sponsorship_requests c WHERE c.id = ${cursor} AND c.wallet_id = w.id)`} AS "cursorValid"
    FROM wallets w WHERE w.wallet_address = ${address}`);
  return rows[0];
}

/** Newest first (requested_at desc, id desc), keyset after `cursor`; `limit + 1` rows tell whether more exist. */
export async function listHistoryPage(db: Executor, walletId: string, cursor: string | undefined, limit: number): Promise<HistoryItemView[]> {
  const after = cursor === undefined
    ? sql``
    : sql`AND (r.requested_at, r.id) < (SELECT c.requested_at, c.id FROM sponsorship_requests c WHERE c.id = ${cursor})`;
  const rows = await queryPrepared<HistoryItemView>(db, sql`
    SELECT r.id, r.wallet_id AS "walletId", r.status,
      ${isoUtc(sql`r.requested_at`)} AS "requestedAt",
      ${isoUtc(sql`r.approved_at`)} AS "approvedAt",
      ${isoUtc(sql`r.completed_at`)} AS "completedAt",
      ${isoUtc(sql`r.failed_at`)} AS "failedAt",
      ${isoUtc(sql`r.rejected_at`)} AS "rejectedAt"
    FROM sponsorship_requests r
    WHERE r.wallet_id = ${walletId} ${after}
    ORDER BY r.requested_at DESC, r.id DESC
    LIMIT ${limit + 1}`);
  return [...rows];
}

/* --------------------------------------------------------------- creation */

export type CreationLimits = {
  ipLimit: number;
  walletLimit: number;
  windowStart: Date;
  replayStart: Date;
};

/** Everything the creation checks need, read in one statement (under the IP and wallet locks). */
export type CreationState = {
  ipBlockedForever: boolean;
  /** Latest expiry of the IP's active automatic blocks (epoch ms), or null. */
  ipBlockedUntilMs: number | null;
  /** The IP's limit-th newest hit in the window (epoch ms), or null while under the limit. */
  ipLimitReachedAtMs: number | null;
  walletId: string | null;
  /** The newest request of the wallet from this IP inside the replay window, or null. */
  replayRequest: RequestView | null;
  walletAdminBlocked: boolean;
  walletBlockedUntilMs: number | null;
  walletLimitReachedAtMs: number | null;
  hasOpenRequest: boolean;
  hasCompletedRequest: boolean;
};

export type CreationStateInput = { ip: string; address: string; now: Date } & CreationLimits;

/** The read of every fact, as one statement (exported for EXPLAIN in performance work). */
export function creationStateQuery(input: CreationStateInput): SQL {
  const { ip, address, now } = input;
  const blockUntil = (subjectType: BlockSubject, subject: SQL | string, kindFilter: SQL) => sql`(
    SELECT (extract(epoch FROM max(b.expires_at)) * 1000)::float8 FROM blocks b
    WHERE b.subject_type = ${subjectType} AND b.subject = ${subject} AND ${kindFilter} AND ${blockActive("b", now)}
  )`;
  return sql`
    SELECT
      EXISTS (
        SELECT 1 FROM blocks b WHERE b.subject_type = 'ip' AND b.subject = ${ip} AND b.expires_at IS NULL AND b.lifted_at IS NULL
      ) AS "ipBlockedForever",
      ${blockUntil("ip", ip, sql`b.expires_at IS NOT NULL`)} AS "ipBlockedUntilMs",
      ${limitReachedAtMs("sponsorship_ip", ip, input.ipLimit, input.windowStart)} AS "ipLimitReachedAtMs",
      w.id AS "walletId",
      (
        SELECT json_build_object(${sql.join(
          requestViewFields.map(([name, expression]) => sql`${sql.raw(`'${name}'`)}, ${expression}`),
          sql`, `,
        )})
        FROM sponsorship_requests r
        WHERE r.wallet_id = w.id AND r.ip_address = ${ip} AND r.requested_at > ${ts(input.replayStart)}
        ORDER BY r.requested_at DESC LIMIT 1
      ) AS "replayRequest",
      EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = ${address} AND b.kind = 'admin' AND ${blockActive("b", now)}
      ) AS "walletAdminBlocked",
      ${blockUntil("wallet", address, sql`b.kind = 'automatic'`)} AS "walletBlockedUntilMs",
      ${limitReachedAtMs("sponsorship_wallet", address, input.walletLimit, input.windowStart)} AS "walletLimitReachedAtMs",
      EXISTS (
        SELECT 1 FROM sponsorship_requests r WHERE r.wallet_id = w.id AND r.status IN ('pending', 'approved', 'relayed')
      ) AS "hasOpenRequest",
      EXISTS (SELECT 1 FROM sponsorship_requests r WHERE r.wallet_id = w.id AND r.status = 'completed') AS "hasCompletedRequest"
    FROM (SELECT 1) AS one
    LEFT JOIN wallets w ON w.wallet_address = ${address}`;
}

export type CreationWrites = {
  now: Date;
  hits: { scope: "sponsorship_ip" | "sponsorship_wallet"; key: string }[];
  block?: { subjectType: BlockSubject; subject: string; reason: string; expiresAt: Date };
  request?: { id: string; walletId: string; walletAddress: string; ipAddress: string; userAgent: string | null };
};

/**
 * The writes of one creation attempt as one statement: counted hits, an automatic block, and the new request
 * with its wallet's counter. An insert that meets another open request of the wallet fails on the partial unique
 * index (the database's guarantee; the caller's lock and check normally prevent it). Undefined: nothing to write.
 */
export function creationWritesSql(writes: CreationWrites): SQL | undefined {
  const parts: SQL[] = [];
  if (writes.hits.length > 0) parts.push(sql`hits AS (${insertHitsSql(writes.hits, writes.now)})`);
  if (writes.block) {
    const b = writes.block;
    parts.push(sql`block AS (
      INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at)
      VALUES (${b.subjectType}, ${b.subject}, 'automatic', ${b.reason}, 'rate_limiter', ${ts(writes.now)}, ${ts(b.expiresAt)})
    )`);
  }
  if (writes.request) {
    const r = writes.request;
    parts.push(sql`request AS (
      INSERT INTO sponsorship_requests (id, wallet_id, wallet_address, ip_address, user_agent, requested_at, status_actor, status_reason)
      VALUES (${r.id}, ${r.walletId}, ${r.walletAddress}, ${r.ipAddress}, ${r.userAgent}, ${ts(writes.now)}, 'api', 'created by POST /sponsorship/request')
      RETURNING wallet_id
    )`);
    parts.push(sql`wallet AS (
      UPDATE wallets SET sponsorship_count = sponsorship_count + 1, last_seen_at = GREATEST(last_seen_at, ${ts(writes.now)})
      WHERE id = (SELECT wallet_id FROM request)
    )`);
  }
  if (parts.length === 0) return undefined;
  return sql`WITH ${sql.join(parts, sql`, `)} SELECT 1`;
}

/**
 * One creation attempt in two round trips (see two-step-transaction.ts): BEGIN, the IP and wallet locks and the
 * read of every fact leave together; `decide` (the domain's rules) says what to write and what to answer; the
 * writes and COMMIT leave together.
 */
export async function attemptCreation<T>(
  db: Database,
  input: CreationStateInput & { lockKeys: readonly string[] },
  decide: (state: CreationState) => Promise<{ writes: CreationWrites; result: T }>,
): Promise<T> {
  return twoStepTransaction(db, [lockKeysSql(input.lockKeys), creationStateQuery(input)], async ([, stateRows]) => {
    const { writes, result } = await decide(stateRows![0] as CreationState);
    const statement = creationWritesSql(writes);
    return { statements: statement ? [statement] : [], finish: () => result };
  });
}
