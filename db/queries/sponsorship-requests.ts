import { sql, type SQL } from "drizzle-orm";
import type { EligibilityReason, RequestStatus } from "@/db/schema";
import type postgres from "postgres";
import type { Database } from "@/db/client";
import { run, type Executor } from "@/db/sql/run";
import { blockActive, isoUtc } from "@/db/sql/fragments";

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

/**
 * A request with its wallet and relay attempts (GET /sponsorship/:id, GET /sponsorship/tx/:hash). `ipAddress` (and
 * `userAgent`) are null once the request ended longer ago than IP_RETENTION_DAYS (db/queries/ip-retention.ts); a
 * request POST /sponsorship/request answers is open or a replay of seconds ago, so RequestView keeps a string.
 */
export type RequestDetailView = Omit<RequestView, "ipAddress"> & {
  ipAddress: string | null;
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
  const rows = await run<RequestDetailView>(db, detailQuery(sql`r.id = ${id}`, now));
  return rows[0];
}

/** The request that owns the relay transaction with this hash (stored lowercase). */
export async function findRequestDetailByTransactionHash(db: Executor, hash: string, now: Date): Promise<RequestDetailView | undefined> {
  const rows = await run<RequestDetailView>(
    db,
    detailQuery(sql`r.id = (SELECT t.sponsorship_request_id FROM relay_transactions t WHERE t.transaction_hash = ${hash.toLowerCase()})`, now),
  );
  return rows[0];
}

/* ---------------------------------------------------------------- history */

export type HistoryItemView = Pick<RequestView, "id" | "walletId" | "status" | "requestedAt" | "approvedAt" | "completedAt" | "failedAt" | "rejectedAt">;

/** The wallet's id and whether `cursor` is one of its requests (undefined when the wallet is not registered). */
export async function findHistoryAnchor(
  db: Executor,
  address: string,
  cursor: string | undefined,
): Promise<{ walletId: string; cursorValid: boolean } | undefined> {
  const rows = await run<{ walletId: string; cursorValid: boolean }>(
    db,
    sql`
    SELECT w.id AS "walletId",
      ${cursor === undefined ? sql`true` : sql`EXISTS (SELECT 1 FROM sponsorship_requests c WHERE c.id = ${cursor} AND c.wallet_id = w.id)`} AS "cursorValid"
    FROM wallets w WHERE w.wallet_address = ${address}`,
  );
  return rows[0];
}

/** Newest first (requested_at desc, id desc), keyset after `cursor`; `limit + 1` rows tell whether more exist. */
export async function listHistoryPage(db: Executor, walletId: string, cursor: string | undefined, limit: number): Promise<HistoryItemView[]> {
  const after =
    cursor === undefined ? sql`` : sql`AND (r.requested_at, r.id) < (SELECT c.requested_at, c.id FROM sponsorship_requests c WHERE c.id = ${cursor})`;
  const rows = await run<HistoryItemView>(
    db,
    sql`
    SELECT r.id, r.wallet_id AS "walletId", r.status,
      ${isoUtc(sql`r.requested_at`)} AS "requestedAt",
      ${isoUtc(sql`r.approved_at`)} AS "approvedAt",
      ${isoUtc(sql`r.completed_at`)} AS "completedAt",
      ${isoUtc(sql`r.failed_at`)} AS "failedAt",
      ${isoUtc(sql`r.rejected_at`)} AS "rejectedAt"
    FROM sponsorship_requests r
    WHERE r.wallet_id = ${walletId} ${after}
    ORDER BY r.requested_at DESC, r.id DESC
    LIMIT ${limit + 1}`,
  );
  return [...rows];
}

/* --------------------------------------------------------------- creation */

export type CreationCallInput = {
  /** The full address, recorded on the request. */
  ip: string;
  /** The client identity every IP limit, block and the replay window key on (lib/sponsorship/client-identity.ts). */
  clientKey: string;
  /** The identity as a CIDR network, matched against administrator IP blocks. */
  clientNetwork: string;
  address: string;
  now: Date;
  ipLimit: number;
  walletLimit: number;
  windowStart: Date;
  replayStart: Date;
  autoBlockMinutes: number;
  ipBlockReason: string;
  walletBlockReason: string;
  requestId: string;
  userAgent: string | null;
  /** The registry whose mirror (registry_sponsored_wallets) tells "already sponsored"; null: none configured. */
  registryAddress: string | null;
  budgetPerHour: number;
  budgetPerDay: number;
  /** The Retry-After this process was last given for a spent budget (epoch ms), or null (see the function). */
  budgetRetryHintMs: number | null;
};

/** Shards of the budget's counters (db/functions/sponsorship_budget.sql): enough that creations rarely share one. */
export const BUDGET_SHARDS = 16;

export type CreationCallResult =
  | { refusal: "rate_limited"; subject: "ip" | "wallet"; retryAtMs: number }
  // retryInMs is absent while an instance of a release from before db/functions/ revisions (db/migrate.ts) has
  // reinstalled its function body, which did not return it (a rolling deploy, a rollback).
  | { refusal: "budget_exhausted"; window: "hour" | "day"; retryAtMs: number; retryInMs?: number }
  | { refusal: "sponsorships_paused" | "ip_blocked" | "wallet_not_registered" | "wallet_blocked" | "request_open" | "already_sponsored" }
  | { outcome: "replayed"; request: RequestView }
  | { outcome: "created"; walletId: string };

const createRequestCallText =
  "SELECT create_sponsorship_request($1::text, $2::text, $3::cidr, $4::text, $5::timestamptz, $6::int, $7::int, $8::timestamptz, " +
  "$9::timestamptz, $10::int, $11::text, $12::text, $13::uuid, $14::text, $15::text, $16::int, $17::int, $18::int, $19::timestamptz) AS result";

/**
 * One creation attempt as one prepared statement: `create_sponsorship_request` (db/functions/
 * create_sponsorship_request.sql) checks pause, IP blocks and the budget, takes the identity's and the wallet's
 * locks, reads, decides in the decisions' order and writes, in the statement's own transaction. A second open
 * request the lock did not catch fails on the partial unique index (23505).
 */
export async function createRequestInDatabase(db: Database, input: CreationCallInput): Promise<CreationCallResult> {
  const rows = await db.$client.unsafe<{ result: CreationCallResult }[]>(
    createRequestCallText,
    [
      input.ip,
      input.clientKey,
      input.clientNetwork,
      input.address,
      input.now.toISOString(),
      input.ipLimit,
      input.walletLimit,
      input.windowStart.toISOString(),
      input.replayStart.toISOString(),
      input.autoBlockMinutes,
      input.ipBlockReason,
      input.walletBlockReason,
      input.requestId,
      input.userAgent,
      input.registryAddress,
      input.budgetPerHour,
      input.budgetPerDay,
      BUDGET_SHARDS,
      input.budgetRetryHintMs === null ? null : new Date(input.budgetRetryHintMs).toISOString(),
    ] as postgres.ParameterOrJSON<never>[],
    { prepare: true },
  );
  return rows[0]!.result;
}
