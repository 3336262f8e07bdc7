import { sql, type SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { BlockSubject, EligibilityReason, RequestStatus } from "@/db/schema";
import type { Database } from "@/db/client";
import type { Executor } from "./executor";
import { blockActive, isoUtc } from "./sql-helpers";
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

/** A statement whose text is built once; only its parameters vary per call (a named prepared statement). */
export type FixedStatement = { text: string; params: unknown[] };

/** The request view as a json_build_object over `sponsorship_requests r` (plain text, built once). */
const requestViewJson = (() => {
  const { sql: text } = new PgDialect().sqlToQuery(
    sql`json_build_object(${sql.join(
      requestViewFields.map(([name, expression]) => sql`${sql.raw(`'${name}'`)}, ${expression}`),
      sql`, `,
    )})`,
  );
  return text;
})();

/**
 * The read of every fact, as one statement. Parameters: $1 ip, $2 wallet address, $3 now, $4 IP limit offset,
 * $5 rate window start, $6 replay window start, $7 wallet limit offset.
 */
const creationStateText = `
    SELECT
      EXISTS (
        SELECT 1 FROM blocks b WHERE b.subject_type = 'ip' AND b.subject = $1::text AND b.expires_at IS NULL AND b.lifted_at IS NULL
      ) AS "ipBlockedForever",
      (
        SELECT (extract(epoch FROM max(b.expires_at)) * 1000)::float8 FROM blocks b
        WHERE b.subject_type = 'ip' AND b.subject = $1::text AND b.expires_at IS NOT NULL
          AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > $3::timestamptz)
      ) AS "ipBlockedUntilMs",
      (
        SELECT (extract(epoch FROM h.created_at) * 1000)::float8 FROM rate_limit_hits h
        WHERE h.scope = 'sponsorship_ip' AND h.key = $1::text AND h.created_at > $5::timestamptz
        ORDER BY h.created_at DESC OFFSET $4::int LIMIT 1
      ) AS "ipLimitReachedAtMs",
      w.id AS "walletId",
      (
        SELECT ${requestViewJson}
        FROM sponsorship_requests r
        WHERE r.wallet_id = w.id AND r.ip_address = $1::text AND r.requested_at > $6::timestamptz
        ORDER BY r.requested_at DESC LIMIT 1
      ) AS "replayRequest",
      EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = $2::text AND b.kind = 'admin'
          AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > $3::timestamptz)
      ) AS "walletAdminBlocked",
      (
        SELECT (extract(epoch FROM max(b.expires_at)) * 1000)::float8 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = $2::text AND b.kind = 'automatic'
          AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > $3::timestamptz)
      ) AS "walletBlockedUntilMs",
      (
        SELECT (extract(epoch FROM h.created_at) * 1000)::float8 FROM rate_limit_hits h
        WHERE h.scope = 'sponsorship_wallet' AND h.key = $2::text AND h.created_at > $5::timestamptz
        ORDER BY h.created_at DESC OFFSET $7::int LIMIT 1
      ) AS "walletLimitReachedAtMs",
      EXISTS (
        SELECT 1 FROM sponsorship_requests r WHERE r.wallet_id = w.id AND r.status IN ('pending', 'approved', 'relayed')
      ) AS "hasOpenRequest",
      EXISTS (SELECT 1 FROM sponsorship_requests r WHERE r.wallet_id = w.id AND r.status = 'completed') AS "hasCompletedRequest"
    FROM (SELECT 1) AS one
    LEFT JOIN wallets w ON w.wallet_address = $2::text`;

/** The read of every fact (exported for EXPLAIN in performance work): fixed text, only parameters vary. */
export function creationStateQuery(input: CreationStateInput): FixedStatement {
  return {
    text: creationStateText,
    params: [
      input.ip,
      input.address,
      input.now.toISOString(),
      Math.max(0, input.ipLimit - 1),
      input.windowStart.toISOString(),
      input.replayStart.toISOString(),
      Math.max(0, input.walletLimit - 1),
    ],
  };
}

/** Both advisory locks of a creation, in sorted key order (lockKeysSql's), as one fixed statement. */
const twoLocksText = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0)), pg_advisory_xact_lock(hashtextextended($2::text, 0))";
function creationLocksStatement(keys: readonly string[]): FixedStatement {
  const sorted = [...new Set(keys)].sort();
  if (sorted.length !== 2) throw new Error(`creation takes two locks, got ${sorted.length}`);
  return { text: twoLocksText, params: sorted };
}

export type CreationWrites = {
  now: Date;
  hits: { scope: "sponsorship_ip" | "sponsorship_wallet"; key: string }[];
  block?: { subjectType: BlockSubject; subject: string; reason: string; expiresAt: Date };
  request?: { id: string; walletId: string; walletAddress: string; ipAddress: string; userAgent: string | null };
};

/** Statement texts of the writes, one per shape (which hits, a block or not, a request or not), built once. */
const writesTexts = new Map<string, string>();

function writesText(shape: string, writes: CreationWrites): string {
  let text = writesTexts.get(shape);
  if (text !== undefined) return text;
  let n = 1; // $1 is now
  const p = () => `$${++n}`;
  const parts: string[] = [];
  if (writes.hits.length > 0) {
    const rows = writes.hits.map(() => `(${p()}::rate_limit_scope, ${p()}::text, $1::timestamptz)`);
    parts.push(`hits AS (INSERT INTO rate_limit_hits (scope, key, created_at) VALUES ${rows.join(", ")})`);
  }
  if (writes.block) {
    parts.push(`block AS (
      INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at)
      VALUES (${p()}::block_subject, ${p()}::text, 'automatic', ${p()}::text, 'rate_limiter', $1::timestamptz, ${p()}::timestamptz)
    )`);
  }
  if (writes.request) {
    parts.push(`request AS (
      INSERT INTO sponsorship_requests (id, wallet_id, wallet_address, ip_address, user_agent, requested_at, status_actor, status_reason)
      VALUES (${p()}::uuid, ${p()}::uuid, ${p()}::text, ${p()}::text, ${p()}::text, $1::timestamptz, 'api', 'created by POST /sponsorship/request')
      RETURNING wallet_id
    )`);
    parts.push(`wallet AS (
      UPDATE wallets SET sponsorship_count = sponsorship_count + 1, last_seen_at = GREATEST(last_seen_at, $1::timestamptz)
      WHERE id = (SELECT wallet_id FROM request)
    )`);
  }
  text = `WITH ${parts.join(", ")} SELECT 1`;
  writesTexts.set(shape, text);
  return text;
}

/**
 * The writes of one creation attempt as one statement: counted hits, an automatic block, and the new request
 * with its wallet's counter. An insert that meets another open request of the wallet fails on the partial unique
 * index (the database's guarantee; the caller's lock and check normally prevent it). Undefined: nothing to write.
 * The text depends only on the shape of the writes (cached); the values are parameters.
 */
export function creationWritesSql(writes: CreationWrites): FixedStatement | undefined {
  if (writes.hits.length === 0 && !writes.block && !writes.request) return undefined;
  const params: unknown[] = [writes.now.toISOString()];
  let shape = "";
  for (const h of writes.hits) {
    shape += h.scope === "sponsorship_ip" ? "i" : "w";
    params.push(h.scope, h.key);
  }
  if (writes.block) {
    shape += "b";
    const b = writes.block;
    params.push(b.subjectType, b.subject, b.reason, b.expiresAt.toISOString());
  }
  if (writes.request) {
    shape += "r";
    const r = writes.request;
    params.push(r.id, r.walletId, r.walletAddress, r.ipAddress, r.userAgent);
  }
  return { text: writesText(shape, writes), params };
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
  return twoStepTransaction(db, [creationLocksStatement(input.lockKeys), creationStateQuery(input)], async ([, stateRows]) => {
    const { writes, result } = await decide(stateRows![0] as CreationState);
    const statement = creationWritesSql(writes);
    return { statements: statement ? [statement] : [], finish: () => result };
  });
}
