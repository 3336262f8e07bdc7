import { and, asc, desc, eq, getTableColumns, gte, inArray, lt, sql, type SQL } from "drizzle-orm";
import type { Database } from "@/db/client";
import { run } from "@/db/sql/run";
import {
  relayerAccounts,
  relayTransactions,
  requestEvents,
  requestStatus,
  sponsorshipRequests,
  wallets,
  workerHeartbeats,
  type RelayerAccount,
  type RelayTransaction,
  type RequestEvent,
  type RequestStatus,
  type SponsorshipRequest,
  type Wallet,
  type WorkerHeartbeat,
} from "@/db/schema";

/** The dashboard's reads. Server components call these directly; nothing here is reachable from a browser. */

/* ------------------------------------------------------------------ overview */

export type StatusCounts = Record<RequestStatus, number>;

/** Requests by status, right now. */
export async function countRequestsByStatus(db: Database): Promise<StatusCounts> {
  const rows = await db
    .select({ status: sponsorshipRequests.status, n: sql<number>`count(*)::int` })
    .from(sponsorshipRequests)
    .groupBy(sponsorshipRequests.status);
  const counts = Object.fromEntries(requestStatus.enumValues.map((s) => [s, 0])) as StatusCounts;
  for (const row of rows) counts[row.status] = row.n;
  return counts;
}

export type OutcomeBucket = { start: Date; completed: number; failed: number };

/**
 * Completed and failed requests per time bucket over [since, until): every bucket is present, empty ones with
 * zeros, so a chart can be drawn without gaps.
 */
export async function getOutcomeSeries(db: Database, options: { since: Date; until: Date; bucketSeconds: number }): Promise<OutcomeBucket[]> {
  const { since, until, bucketSeconds } = options;
  const step = sql.raw(`'${Math.max(1, Math.floor(bucketSeconds))} seconds'::interval`);
  const rows = await run<{ start: Date | string; completed: number; failed: number }>(
    db,
    sql`
    WITH buckets AS (
      SELECT generate_series(
        date_bin(${step}, ${since.toISOString()}::timestamptz, 'epoch'::timestamptz),
        ${until.toISOString()}::timestamptz - interval '1 millisecond',
        ${step}
      ) AS start
    ),
    completed AS (
      SELECT date_bin(${step}, completed_at, 'epoch'::timestamptz) AS start, count(*)::int AS n
      FROM sponsorship_requests
      WHERE status = 'completed' AND completed_at >= ${since.toISOString()}::timestamptz AND completed_at < ${until.toISOString()}::timestamptz
      GROUP BY 1
    ),
    failed AS (
      SELECT date_bin(${step}, failed_at, 'epoch'::timestamptz) AS start, count(*)::int AS n
      FROM sponsorship_requests
      WHERE status = 'failed' AND failed_at >= ${since.toISOString()}::timestamptz AND failed_at < ${until.toISOString()}::timestamptz
      GROUP BY 1
    )
    SELECT b.start, coalesce(c.n, 0) AS completed, coalesce(f.n, 0) AS failed
    FROM buckets b
    LEFT JOIN completed c ON c.start = b.start
    LEFT JOIN failed f ON f.start = b.start
    ORDER BY b.start
  `,
  );
  return rows.map((r) => ({ start: new Date(r.start), completed: Number(r.completed), failed: Number(r.failed) }));
}

export type CompletionLatency = { count: number; medianMs: number | null; p95Ms: number | null };

/** Median and p95 of completedAt - requestedAt for requests completed since `since`. */
export async function getCompletionLatency(db: Database, since: Date): Promise<CompletionLatency> {
  const [row] = await db
    .select({
      count: sql<number>`count(*)::int`,
      median: sql<
        number | null
      >`percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM ${sponsorshipRequests.completedAt} - ${sponsorshipRequests.requestedAt}) * 1000)`,
      p95: sql<
        number | null
      >`percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM ${sponsorshipRequests.completedAt} - ${sponsorshipRequests.requestedAt}) * 1000)`,
    })
    .from(sponsorshipRequests)
    .where(and(eq(sponsorshipRequests.status, "completed"), gte(sponsorshipRequests.completedAt, since)));
  const toMs = (v: number | string | null | undefined) => (v === null || v === undefined ? null : Math.round(Number(v)));
  return { count: row?.count ?? 0, medianMs: toMs(row?.median), p95Ms: toMs(row?.p95) };
}

export type QueueStage = {
  stage: "pending" | "approved" | "relayed";
  depth: number;
  /** Requests of the stage the worker may take now (not waiting on a backoff). */
  ready: number;
  oldestRequestedAt: Date | null;
};

/**
 * Open requests per pipeline stage: how many, how many ready, and the oldest. "Ready" is judged by the database's
 * clock, the one the worker sets `available_at` with.
 */
export async function getQueueDepth(db: Database): Promise<QueueStage[]> {
  const rows = await db
    .select({
      status: sponsorshipRequests.status,
      depth: sql<number>`count(*)::int`,
      ready: sql<number>`(count(*) FILTER (WHERE ${sponsorshipRequests.availableAt} <= now()))::int`,
      oldest: sql<Date | string | null>`min(${sponsorshipRequests.requestedAt})`,
    })
    .from(sponsorshipRequests)
    .where(inArray(sponsorshipRequests.status, ["pending", "approved", "relayed"]))
    .groupBy(sponsorshipRequests.status);
  const stages = ["pending", "approved", "relayed"] as const;
  return stages.map((stage) => {
    const row = rows.find((r) => r.status === stage);
    return {
      stage,
      depth: row?.depth ?? 0,
      ready: row?.ready ?? 0,
      oldestRequestedAt: row?.oldest ? new Date(row.oldest) : null,
    };
  });
}

/** The worker heartbeats, newest first, each with its age in ms as the database counts it (`now()` against what it stored). */
export async function listWorkerHeartbeats(db: Database): Promise<(WorkerHeartbeat & { ageMs: number })[]> {
  return db
    .select({
      ...getTableColumns(workerHeartbeats),
      ageMs: sql<number>`greatest(0, extract(epoch FROM now() - ${workerHeartbeats.lastBeatAt}) * 1000)::float8`,
    })
    .from(workerHeartbeats)
    .orderBy(desc(workerHeartbeats.lastBeatAt));
}

export type RelayerAccountSummary = RelayerAccount & { inFlight: number };

/** The relayer accounts known to the database, with their next nonce and transactions in flight. */
export async function listRelayerAccounts(db: Database): Promise<RelayerAccountSummary[]> {
  const accounts = await db.select().from(relayerAccounts).orderBy(asc(relayerAccounts.address));
  if (accounts.length === 0) return [];
  const inFlight = await db
    // Per nonce: a replaced attempt and its replacement at one nonce are one transaction in flight.
    .select({ address: relayTransactions.relayerAddress, n: sql<number>`count(DISTINCT ${relayTransactions.nonce})::int` })
    .from(relayTransactions)
    .where(inArray(relayTransactions.status, ["queued", "submitted"]))
    .groupBy(relayTransactions.relayerAddress);
  return accounts.map((a) => ({ ...a, inFlight: inFlight.find((r) => r.address === a.address)?.n ?? 0 }));
}

/* ------------------------------------------------------------------ requests */

export type RequestSearch =
  { kind: "address"; value: string } | { kind: "id"; value: string } | { kind: "hash"; value: string } | { kind: "invalid"; value: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What a search box value is: a wallet address, a request id or a transaction hash (any case). */
export function classifyRequestSearch(raw: string): RequestSearch | undefined {
  const value = raw.trim();
  if (value === "") return undefined;
  if (/^0x[0-9a-fA-F]{40}$/.test(value)) return { kind: "address", value: value.toLowerCase() };
  if (/^0x[0-9a-fA-F]{64}$/.test(value)) return { kind: "hash", value: value.toLowerCase() };
  if (UUID.test(value)) return { kind: "id", value: value.toLowerCase() };
  return { kind: "invalid", value };
}

export type RequestCursor = { requestedAt: Date; id: string };

/** Opaque keyset cursor: `<requestedAt ISO>_<id>` in base64url. */
export function encodeRequestCursor(cursor: RequestCursor): string {
  return Buffer.from(`${cursor.requestedAt.toISOString()}_${cursor.id}`, "utf8").toString("base64url");
}

export function decodeRequestCursor(raw: string | undefined): RequestCursor | undefined {
  if (!raw || raw.length > 200) return undefined;
  const text = Buffer.from(raw, "base64url").toString("utf8");
  const [iso, id] = text.split("_");
  if (!iso || !id || !UUID.test(id)) return undefined;
  const requestedAt = new Date(iso);
  if (Number.isNaN(requestedAt.getTime())) return undefined;
  // Years 1-9999 only: PostgreSQL refuses JavaScript's year 0, negative and 6-digit years in ISO form.
  const year = requestedAt.getUTCFullYear();
  if (year < 1 || year > 9999) return undefined;
  return { requestedAt, id: id.toLowerCase() };
}

export type RequestListFilters = {
  statuses?: readonly RequestStatus[];
  /** requestedAt >= from */
  from?: Date;
  /** requestedAt < to */
  to?: Date;
  search?: RequestSearch;
};

export type RequestListRow = Pick<
  SponsorshipRequest,
  "id" | "walletAddress" | "status" | "requestedAt" | "completedAt" | "failedAt" | "rejectedAt" | "eligibilityReason"
> & { transactionHash: string | null; relayAttempts: number };

export type RequestListPage = {
  rows: RequestListRow[];
  /** Cursor of the next (older) page, when there is one. */
  olderCursor: string | null;
  /** Cursor of the previous (newer) page, when there is one. */
  newerCursor: string | null;
};

/**
 * The requests table, newest first, with keyset pagination on (requestedAt, id): `after` walks to older rows,
 * `before` back to newer ones. Stable under inserts, and constant cost at any depth (index
 * sponsorship_requests_requested_at_idx).
 */
export async function listRequests(
  db: Database,
  options: RequestListFilters & { after?: RequestCursor; before?: RequestCursor; limit?: number },
): Promise<RequestListPage> {
  const limit = Math.min(Math.max(options.limit ?? 25, 1), 200);
  const r = sponsorshipRequests;
  const where: SQL[] = [];
  if (options.statuses && options.statuses.length > 0) where.push(inArray(r.status, [...options.statuses]));
  if (options.from) where.push(gte(r.requestedAt, options.from));
  if (options.to) where.push(lt(r.requestedAt, options.to));
  const search = options.search;
  if (search) {
    if (search.kind === "address") where.push(eq(r.walletAddress, search.value));
    else if (search.kind === "id") where.push(eq(r.id, search.value));
    else if (search.kind === "hash")
      where.push(
        inArray(
          r.id,
          db.select({ id: relayTransactions.sponsorshipRequestId }).from(relayTransactions).where(eq(relayTransactions.transactionHash, search.value)),
        ),
      );
    else return { rows: [], olderCursor: null, newerCursor: null };
  }

  const backwards = !options.after && !!options.before;
  const keyset = options.after ?? options.before;
  if (keyset) {
    const at = keyset.requestedAt.toISOString();
    where.push(
      backwards
        ? sql`(${r.requestedAt}, ${r.id}) > (${at}::timestamptz, ${keyset.id}::uuid)`
        : sql`(${r.requestedAt}, ${r.id}) < (${at}::timestamptz, ${keyset.id}::uuid)`,
    );
  }

  // Correlated subqueries name the outer table explicitly: Drizzle leaves columns unqualified in one-table selects.
  const latestHash = sql<string | null>`(
    SELECT rt.transaction_hash FROM relay_transactions rt
    WHERE rt.sponsorship_request_id = sponsorship_requests.id AND rt.transaction_hash IS NOT NULL
    ORDER BY (rt.status = 'confirmed') DESC, (rt.status = 'submitted') DESC, rt.relay_attempt DESC LIMIT 1)`;
  const attempts = sql<number>`(SELECT count(*)::int FROM relay_transactions rt WHERE rt.sponsorship_request_id = sponsorship_requests.id)`;

  const fetched = await db
    .select({
      id: r.id,
      walletAddress: r.walletAddress,
      status: r.status,
      requestedAt: r.requestedAt,
      completedAt: r.completedAt,
      failedAt: r.failedAt,
      rejectedAt: r.rejectedAt,
      eligibilityReason: r.eligibilityReason,
      transactionHash: latestHash,
      relayAttempts: attempts,
    })
    .from(r)
    .where(where.length > 0 ? and(...where) : undefined)
    .orderBy(...(backwards ? [asc(r.requestedAt), asc(r.id)] : [desc(r.requestedAt), desc(r.id)]))
    .limit(limit + 1);

  const more = fetched.length > limit;
  const page = fetched.slice(0, limit);
  if (backwards) page.reverse();
  const first = page[0];
  const last = page[page.length - 1];
  const hasOlder = backwards ? true : more;
  const hasNewer = backwards ? more : !!keyset;
  return {
    rows: page,
    olderCursor: hasOlder && last ? encodeRequestCursor(last) : null,
    newerCursor: hasNewer && first ? encodeRequestCursor(first) : null,
  };
}

export type RequestDetail = {
  request: SponsorshipRequest;
  wallet: Wallet | null;
  events: RequestEvent[];
  relays: RelayTransaction[];
};

/** One request with its wallet, its audit trail (request_events) and every relay attempt. */
export async function getRequestDetail(db: Database, id: string): Promise<RequestDetail | null> {
  if (!UUID.test(id)) return null;
  const [request] = await db.select().from(sponsorshipRequests).where(eq(sponsorshipRequests.id, id.toLowerCase())).limit(1);
  if (!request) return null;
  const [[wallet], events, relays] = await Promise.all([
    db.select().from(wallets).where(eq(wallets.id, request.walletId)).limit(1),
    db.select().from(requestEvents).where(eq(requestEvents.sponsorshipRequestId, request.id)).orderBy(asc(requestEvents.id)),
    db.select().from(relayTransactions).where(eq(relayTransactions.sponsorshipRequestId, request.id)).orderBy(asc(relayTransactions.relayAttempt)),
  ]);
  return { request, wallet: wallet ?? null, events, relays };
}

/* ------------------------------------------------------------------- wallets */

export async function findWalletByAddress(db: Database, address: string): Promise<Wallet | null> {
  const [row] = await db.select().from(wallets).where(eq(wallets.walletAddress, address.toLowerCase())).limit(1);
  return row ?? null;
}

/** The latest requests of a wallet, newest first. */
export async function listWalletRequests(
  db: Database,
  walletId: string,
  limit = 20,
): Promise<Pick<SponsorshipRequest, "id" | "status" | "requestedAt" | "completedAt" | "failedAt" | "rejectedAt">[]> {
  return db
    .select({
      id: sponsorshipRequests.id,
      status: sponsorshipRequests.status,
      requestedAt: sponsorshipRequests.requestedAt,
      completedAt: sponsorshipRequests.completedAt,
      failedAt: sponsorshipRequests.failedAt,
      rejectedAt: sponsorshipRequests.rejectedAt,
    })
    .from(sponsorshipRequests)
    .where(eq(sponsorshipRequests.walletId, walletId))
    .orderBy(desc(sponsorshipRequests.requestedAt), desc(sponsorshipRequests.id))
    .limit(limit);
}

/** Totals shown beside the status counts. */
export async function countWallets(db: Database): Promise<number> {
  const [row] = await db.select({ n: sql<number>`count(*)::int` }).from(wallets);
  return row?.n ?? 0;
}
