import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  cidr,
  index,
  integer,
  jsonb,
  numeric,
  pgEnum,
  primaryKey,
  smallint,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { REQUEST_STATUSES } from "../lib/sponsorship/status";

/**
 * The whole schema. The database holds the truth: invariants that matter are enforced here (checks, partial
 * unique indexes, foreign keys) and by triggers: migration 0001's (legal status transitions) and
 * db/functions/sponsorship_requests_audit.sql's (audit trail).
 * Timestamps are timestamptz with millisecond precision, the precision of the wire format.
 *
 * One piece on purpose (over 350 lines): drizzle-kit generates the migrations from this one file
 * (drizzle.config.ts), and a reader finds every table, enum and constraint in one place, each table followed by
 * its inferred types (docs/architecture.md).
 */

const ts = (name: string) => timestamp(name, { withTimezone: true, precision: 3, mode: "date" });
const wei = (name: string) => numeric(name, { precision: 78, scale: 0, mode: "bigint" });

/* ------------------------------------------------------------------ enums */

/** From the one status list (lib/sponsorship/status.ts), which the zod schema and the client types share. */
export const requestStatus = pgEnum("request_status", REQUEST_STATUSES);
export { OPEN_REQUEST_STATUSES, TERMINAL_REQUEST_STATUSES, type RequestStatus } from "@/lib/sponsorship/status";

export const eligibilityReason = pgEnum("eligibility_reason", ["eligible", "wallet_blocked", "already_sponsored", "payment_refused"]);
export type EligibilityReason = (typeof eligibilityReason.enumValues)[number];

export const relayStatus = pgEnum("relay_status", ["queued", "submitted", "confirmed", "failed"]);
export type RelayStatus = (typeof relayStatus.enumValues)[number];

export const blockSubject = pgEnum("block_subject", ["wallet", "ip"]);
export type BlockSubject = (typeof blockSubject.enumValues)[number];

export const blockKind = pgEnum("block_kind", ["automatic", "admin"]);
export type BlockKind = (typeof blockKind.enumValues)[number];

export const rateLimitScope = pgEnum("rate_limit_scope", ["sponsorship_ip", "sponsorship_wallet", "register_ip", "admin_sign_in"]);
export type RateLimitScope = (typeof rateLimitScope.enumValues)[number];

/* ---------------------------------------------------------------- wallets */

export const wallets = pgTable(
  "wallets",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    walletAddress: text("wallet_address").notNull(),
    firstSeenAt: ts("first_seen_at").notNull().defaultNow(),
    lastSeenAt: ts("last_seen_at").notNull().defaultNow(),
    /** Sponsorship requests ever created (201) for the wallet. */
    sponsorshipCount: integer("sponsorship_count").notNull().default(0),
  },
  (t) => [
    uniqueIndex("wallets_wallet_address_key").on(t.walletAddress),
    check("wallets_wallet_address_lowercase", sql`${t.walletAddress} ~ '^0x[0-9a-f]{40}$'`),
    check("wallets_sponsorship_count_non_negative", sql`${t.sponsorshipCount} >= 0`),
  ],
);
export type Wallet = typeof wallets.$inferSelect;
export type NewWallet = typeof wallets.$inferInsert;

/* ----------------------------------------------------- abuse: blocks, limits */

/**
 * Blocks of a wallet or an IP. Automatic blocks (rate limiting) expire at `expiresAt`; administrator blocks have
 * no expiry until lifted. A wallet `isBlocked` while it has a block that is not lifted and not expired. An automatic
 * block of an IP (its subject a client identity) is deleted once it ended longer ago than IP_RETENTION_DAYS.
 */
export const blocks = pgTable(
  "blocks",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    subjectType: blockSubject("subject_type").notNull(),
    /** A lowercase wallet address or an IP address. */
    subject: text("subject").notNull(),
    kind: blockKind("kind").notNull(),
    reason: text("reason").notNull(),
    /** `rate_limiter`, or `admin` plus the session that acted. */
    createdBy: text("created_by").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
    expiresAt: ts("expires_at"),
    liftedAt: ts("lifted_at"),
    liftedBy: text("lifted_by"),
    liftReason: text("lift_reason"),
  },
  (t) => [
    index("blocks_active_subject_idx")
      .on(t.subjectType, t.subject)
      .where(sql`${t.liftedAt} IS NULL`),
    check("blocks_automatic_expires", sql`${t.kind} <> 'automatic' OR ${t.expiresAt} IS NOT NULL`),
    check("blocks_wallet_subject_lowercase", sql`${t.subjectType} <> 'wallet' OR ${t.subject} ~ '^0x[0-9a-f]{40}$'`),
    check("blocks_lift_complete", sql`(${t.liftedAt} IS NULL) = (${t.liftedBy} IS NULL)`),
  ],
);
export type Block = typeof blocks.$inferSelect;
export type NewBlock = typeof blocks.$inferInsert;

/** One row per counted hit; a rolling-hour limit counts the rows of the last hour. Old rows are pruned. */
export const rateLimitHits = pgTable(
  "rate_limit_hits",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    scope: rateLimitScope("scope").notNull(),
    key: text("key").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [index("rate_limit_hits_scope_key_created_idx").on(t.scope, t.key, t.createdAt)],
);
export type RateLimitHit = typeof rateLimitHits.$inferSelect;

/**
 * Administrator blocks of an IPv4 or IPv6 address or CIDR prefix (decisions.md, "On the open internet"), until lifted.
 * A client is refused when its identity network (lib/sponsorship/client-identity.ts) overlaps an active block: the
 * GiST index (`inet_ops`) answers that as an index lookup, however many blocks there are.
 */
export const ipBlocks = pgTable(
  "ip_blocks",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    cidr: cidr("cidr").notNull(),
    reason: text("reason").notNull(),
    /** `admin:<session>`. */
    createdBy: text("created_by").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
    liftedAt: ts("lifted_at"),
    liftedBy: text("lifted_by"),
  },
  (t) => [
    index("ip_blocks_active_cidr_idx")
      .using("gist", t.cidr.op("inet_ops"))
      .where(sql`${t.liftedAt} IS NULL`),
    check("ip_blocks_lift_complete", sql`(${t.liftedAt} IS NULL) = (${t.liftedBy} IS NULL)`),
  ],
);
export type IpBlock = typeof ipBlocks.$inferSelect;

/**
 * The global budget's counters (decisions.md, "Global budget"), without a global serialisation point: each
 * creation adds one to the row of its shard (the connection's backend pid modulo the shards) and the current
 * minute, so creations of different shards never wait for each other.
 */
export const sponsorshipBudgetCounts = pgTable(
  "sponsorship_budget_counts",
  {
    shard: smallint("shard").notNull(),
    minute: ts("minute").notNull(),
    /** Requests created through this shard in this minute. */
    created: integer("created").notNull(),
  },
  (t) => [primaryKey({ columns: [t.shard, t.minute] }), index("sponsorship_budget_counts_minute_idx").on(t.minute)],
);

/**
 * The budget windows' settled part, once per minute: what the rolling hour and day counted up to two minutes before
 * `minute` (those minutes take no more creations), written by the first budget read of the minute. A read then adds
 * the live rows of the last two minutes: one key lookup and a short range, however long the window.
 */
export const sponsorshipBudgetWindows = pgTable("sponsorship_budget_windows", {
  minute: ts("minute").primaryKey(),
  /** Created in [minute - 60 min, minute - 2 min]. */
  hourSettled: bigint("hour_settled", { mode: "number" }).notNull(),
  /** Created in [minute - 1440 min, minute - 2 min]. */
  daySettled: bigint("day_settled", { mode: "number" }).notNull(),
});

/** The service's switches, one row (id 1): the administrator's pause (decisions.md, "Pause"). */
export const serviceState = pgTable(
  "service_state",
  {
    id: smallint("id").primaryKey().default(1),
    paused: boolean("paused").notNull().default(false),
    pauseReason: text("pause_reason"),
    pausedAt: ts("paused_at"),
    pausedBy: text("paused_by"),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [
    check("service_state_one_row", sql`${t.id} = 1`),
    check("service_state_pause_has_reason", sql`NOT ${t.paused} OR (${t.pauseReason} IS NOT NULL AND ${t.pausedAt} IS NOT NULL)`),
  ],
);
export type ServiceState = typeof serviceState.$inferSelect;

/**
 * Which revision of db/functions/ the database holds, one row (id 1), written by db/migrate.ts. A process installs
 * its function bodies only when its revision is not older than this one, so an older process started beside a
 * newer one (a rolling deploy, a restart of a worker not yet replaced) does not put its older bodies back; after an
 * operator's rollback, processes of the revision rolled back from do not put theirs back either.
 */
export const installedFunctions = pgTable(
  "installed_functions",
  {
    id: smallint("id").primaryKey().default(1),
    revision: integer("revision").notNull(),
    /** sha256 of the sources as installed (FUNCTIONS_SHA256 of the installing instance). */
    sha256: text("sha256").notNull(),
    /** Set by `npm run db:migrate -- --roll-back-functions` over a newer revision: that revision's start-ups keep these. */
    rolledBackFrom: integer("rolled_back_from"),
    installedAt: ts("installed_at").notNull().defaultNow(),
  },
  (t) => [check("installed_functions_one_row", sql`${t.id} = 1`)],
);
export type InstalledFunctions = typeof installedFunctions.$inferSelect;

/**
 * The registry's mirror (decisions.md, "No chain call for a request the database refuses"): wallets its
 * `WalletSponsored` events name, indexed by the worker, so creation decides "already sponsored" without a chain
 * call. Review still asks the chain itself. `registry_index` keeps the next block to read per registry: every block
 * below it was read from an endpoint that knew it (worker/registry-index.ts).
 */
export const registrySponsoredWallets = pgTable(
  "registry_sponsored_wallets",
  {
    registryAddress: text("registry_address").notNull(),
    walletAddress: text("wallet_address").notNull(),
    blockNumber: bigint("block_number", { mode: "bigint" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.registryAddress, t.walletAddress] })],
);

export const registryIndex = pgTable("registry_index", {
  registryAddress: text("registry_address").primaryKey(),
  nextBlock: bigint("next_block", { mode: "bigint" }).notNull(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});

/* ------------------------------------------------- sponsorship requests */

export const sponsorshipRequests = pgTable(
  "sponsorship_requests",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    walletId: uuid("wallet_id")
      .notNull()
      .references(() => wallets.id, { onDelete: "restrict" }),
    walletAddress: text("wallet_address").notNull(),
    status: requestStatus("status").notNull().default("pending"),
    eligibilityReason: eligibilityReason("eligibility_reason"),
    /**
     * The requester's full address, its limit identity (lib/sponsorship/client-identity.ts: the replay window's "same
     * IP") and User-Agent. All three are set to NULL once the request has ended and is older than IP_RETENTION_DAYS
     * (db/queries/ip-retention.ts); an open request keeps them (limits, replay).
     */
    ipAddress: text("ip_address"),
    clientKey: text("client_key"),
    userAgent: text("user_agent"),
    requestedAt: ts("requested_at").notNull().defaultNow(),
    approvedAt: ts("approved_at"),
    rejectedAt: ts("rejected_at"),
    relayedAt: ts("relayed_at"),
    completedAt: ts("completed_at"),
    failedAt: ts("failed_at"),
    /** Why the request failed, in plain words (set with `failed`). */
    failureReason: text("failure_reason"),
    /** The worker does not look at the row again before this time (backoff, waiting for funds). */
    availableAt: ts("available_at").notNull().defaultNow(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
    /**
     * Who made the latest status change (`api`, `worker:<id>`, `admin:<session>`) and why. Every UPDATE that
     * changes `status` sets both; the audit trigger copies them into `request_events`.
     */
    statusActor: text("status_actor").notNull().default("api"),
    statusReason: text("status_reason"),
  },
  (t) => [
    // One non-terminal request per wallet, under any concurrency (decisions: "Enforce it in the database").
    uniqueIndex("sponsorship_requests_one_open_per_wallet")
      .on(t.walletId)
      .where(sql`${t.status} IN ('pending', 'approved', 'relayed')`),
    // History: newest first, keyset on (requested_at, id).
    index("sponsorship_requests_wallet_history_idx").on(t.walletId, t.requestedAt.desc(), t.id.desc()),
    // The worker's queue: open requests by stage.
    index("sponsorship_requests_queue_idx")
      .on(t.status, t.availableAt)
      .where(sql`${t.status} IN ('pending', 'approved', 'relayed')`),
    // Dashboard listing and time ranges.
    index("sponsorship_requests_requested_at_idx").on(t.requestedAt.desc(), t.id.desc()),
    // IP retention (db/queries/ip-retention.ts): the requests that still hold personal data, oldest first. A request
    // leaves it when the retention removes its data, so a pass reads what it changes, not the whole history before it.
    index("sponsorship_requests_personal_data_idx")
      .on(t.requestedAt)
      .where(sql`${t.ipAddress} IS NOT NULL OR ${t.userAgent} IS NOT NULL OR ${t.clientKey} IS NOT NULL`),
    check("sponsorship_requests_wallet_address_lowercase", sql`${t.walletAddress} ~ '^0x[0-9a-f]{40}$'`),
    check(
      "sponsorship_requests_timestamps_match_status",
      sql`(${t.status} <> 'approved' OR ${t.approvedAt} IS NOT NULL)
        AND (${t.status} <> 'rejected' OR ${t.rejectedAt} IS NOT NULL)
        AND (${t.status} <> 'relayed' OR ${t.relayedAt} IS NOT NULL)
        AND (${t.status} <> 'completed' OR ${t.completedAt} IS NOT NULL)
        AND (${t.status} <> 'failed' OR ${t.failedAt} IS NOT NULL)`,
    ),
  ],
);
export type SponsorshipRequest = typeof sponsorshipRequests.$inferSelect;
export type NewSponsorshipRequest = typeof sponsorshipRequests.$inferInsert;

/** The audit trail: one row per status change (and one for creation), written by a trigger. */
export const requestEvents = pgTable(
  "request_events",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    sponsorshipRequestId: uuid("sponsorship_request_id")
      .notNull()
      .references(() => sponsorshipRequests.id, { onDelete: "cascade" }),
    fromStatus: requestStatus("from_status"),
    toStatus: requestStatus("to_status").notNull(),
    actor: text("actor").notNull(),
    reason: text("reason"),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [index("request_events_request_idx").on(t.sponsorshipRequestId, t.id)],
);
export type RequestEvent = typeof requestEvents.$inferSelect;

/* ---------------------------------------------------- relay transactions */

/**
 * One row per submission attempt (1..MAX_RELAY_ATTEMPTS). The signed raw transaction and its hash are stored
 * before broadcast, so a worker that dies at any instant can find, re-broadcast or confirm what it sent.
 * A replacement of a stuck transaction is the next attempt, at the same nonce with higher fees.
 */
export const relayTransactions = pgTable(
  "relay_transactions",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    sponsorshipRequestId: uuid("sponsorship_request_id")
      .notNull()
      .references(() => sponsorshipRequests.id, { onDelete: "restrict" }),
    relayAttempt: integer("relay_attempt").notNull(),
    status: relayStatus("status").notNull().default("queued"),
    relayerAddress: text("relayer_address"),
    nonce: bigint("nonce", { mode: "number" }),
    transactionHash: text("transaction_hash"),
    rawTransaction: text("raw_transaction"),
    maxFeePerGas: wei("max_fee_per_gas"),
    maxPriorityFeePerGas: wei("max_priority_fee_per_gas"),
    gasLimit: wei("gas_limit"),
    createdAt: ts("created_at").notNull().defaultNow(),
    submittedAt: ts("submitted_at"),
    confirmedAt: ts("confirmed_at"),
    failedAt: ts("failed_at"),
    failureReason: text("failure_reason"),
    blockNumber: bigint("block_number", { mode: "number" }),
    gasUsed: wei("gas_used"),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("relay_transactions_attempt_key").on(t.sponsorshipRequestId, t.relayAttempt),
    uniqueIndex("relay_transactions_hash_key").on(t.transactionHash),
    index("relay_transactions_open_idx")
      .on(t.status, t.relayerAddress, t.nonce)
      .where(sql`${t.status} IN ('queued', 'submitted')`),
    index("relay_transactions_relayer_nonce_idx").on(t.relayerAddress, t.nonce),
    check("relay_transactions_attempt_positive", sql`${t.relayAttempt} >= 1`),
    check("relay_transactions_hash_format", sql`${t.transactionHash} IS NULL OR ${t.transactionHash} ~ '^0x[0-9a-f]{64}$'`),
    check("relay_transactions_relayer_lowercase", sql`${t.relayerAddress} IS NULL OR ${t.relayerAddress} ~ '^0x[0-9a-f]{40}$'`),
    check("relay_transactions_failed_has_reason", sql`${t.status} <> 'failed' OR (${t.failedAt} IS NOT NULL AND ${t.failureReason} IS NOT NULL)`),
  ],
);
export type RelayTransaction = typeof relayTransactions.$inferSelect;
export type NewRelayTransaction = typeof relayTransactions.$inferInsert;

/** A relayer account's nonce sequence, leased to exactly one worker at a time. */
export const relayerAccounts = pgTable(
  "relayer_accounts",
  {
    address: text("address").primaryKey(),
    chainId: integer("chain_id").notNull(),
    /** The next nonce this service will assign for the account. */
    nextNonce: bigint("next_nonce", { mode: "number" }).notNull().default(0),
    leaseOwner: text("lease_owner"),
    leaseExpiresAt: ts("lease_expires_at"),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [check("relayer_accounts_address_lowercase", sql`${t.address} ~ '^0x[0-9a-f]{40}$'`)],
);
export type RelayerAccount = typeof relayerAccounts.$inferSelect;

/**
 * Transactions that fill a relayer nonce without sponsoring anything (a zero-value transfer to itself): they
 * cancel the last attempt of a request that ran out of attempts while still unmined, or fill a nonce whose
 * stored transaction the node refused, so later nonces are not held back. Stored before broadcast, like relays.
 */
export const relayerNonceFills = pgTable(
  "relayer_nonce_fills",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    relayerAddress: text("relayer_address").notNull(),
    nonce: bigint("nonce", { mode: "number" }).notNull(),
    /** The request whose unmined attempt this fill cancels, if any. */
    sponsorshipRequestId: uuid("sponsorship_request_id").references(() => sponsorshipRequests.id, { onDelete: "restrict" }),
    status: relayStatus("status").notNull().default("queued"),
    reason: text("reason").notNull(),
    transactionHash: text("transaction_hash").notNull(),
    rawTransaction: text("raw_transaction").notNull(),
    maxFeePerGas: wei("max_fee_per_gas").notNull(),
    maxPriorityFeePerGas: wei("max_priority_fee_per_gas").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
    submittedAt: ts("submitted_at"),
    resolvedAt: ts("resolved_at"),
    blockNumber: bigint("block_number", { mode: "number" }),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("relayer_nonce_fills_hash_key").on(t.transactionHash),
    index("relayer_nonce_fills_relayer_nonce_idx").on(t.relayerAddress, t.nonce),
    check("relayer_nonce_fills_relayer_lowercase", sql`${t.relayerAddress} ~ '^0x[0-9a-f]{40}$'`),
    check("relayer_nonce_fills_hash_format", sql`${t.transactionHash} ~ '^0x[0-9a-f]{64}$'`),
  ],
);
export type RelayerNonceFill = typeof relayerNonceFills.$inferSelect;

/** Liveness of worker processes; feeds `/health` and the dashboard. */
export const workerHeartbeats = pgTable("worker_heartbeats", {
  workerId: text("worker_id").primaryKey(),
  hostname: text("hostname").notNull(),
  pid: integer("pid").notNull(),
  startedAt: ts("started_at").notNull().defaultNow(),
  lastBeatAt: ts("last_beat_at").notNull().defaultNow(),
  details: jsonb("details").$type<Record<string, unknown>>().notNull().default({}),
});
export type WorkerHeartbeat = typeof workerHeartbeats.$inferSelect;

/* ---------------------------------------------------------- administration */

export const adminSessions = pgTable(
  "admin_sessions",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    /** SHA-256 of the session cookie's secret; the secret itself is never stored. */
    tokenHash: text("token_hash").notNull(),
    /**
     * Which ADMIN_TOKEN opened it (lib/admin/secrets.ts sessionCredential, keyed with the token over the cookie's
     * secret): a session counts only while the configured token is the same, so changing or unsetting ADMIN_TOKEN
     * ends every session. Null: opened before this column, never valid.
     */
    credential: text("credential"),
    createdAt: ts("created_at").notNull().defaultNow(),
    expiresAt: ts("expires_at").notNull(),
    revokedAt: ts("revoked_at"),
    /** Removed once the session ended (expired or revoked) longer ago than IP_RETENTION_DAYS. */
    ipAddress: text("ip_address"),
    userAgent: text("user_agent"),
  },
  (t) => [uniqueIndex("admin_sessions_token_hash_key").on(t.tokenHash)],
);
export type AdminSession = typeof adminSessions.$inferSelect;

/**
 * Every administrator action (sign-in, sign-out, block, unblock), with time and reason. `ipAddress` (and the
 * User-Agent a sign-in keeps in `details`) are removed once the action is older than IP_RETENTION_DAYS.
 */
export const adminActions = pgTable(
  "admin_actions",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    action: text("action").notNull(),
    subject: text("subject"),
    reason: text("reason"),
    sessionId: uuid("session_id"),
    ipAddress: text("ip_address"),
    details: jsonb("details").$type<Record<string, unknown>>().notNull().default({}),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [
    index("admin_actions_created_idx").on(t.createdAt.desc()),
    index("admin_actions_subject_idx").on(t.subject),
    // IP retention (db/queries/ip-retention.ts): the actions that still hold an IP address or a User-Agent (sign-ins
    // keep it in `details`), oldest first; failed sign-ins come from anyone on the internet, so there may be many.
    index("admin_actions_personal_data_idx")
      .on(t.createdAt)
      .where(sql`${t.ipAddress} IS NOT NULL OR ${t.details} ? 'userAgent'`),
  ],
);
export type AdminAction = typeof adminActions.$inferSelect;

/* ---------------------------------------------------------------- webhooks */

export const webhookDeliveryStatus = pgEnum("webhook_delivery_status", ["pending", "delivered", "failed"]);
export type WebhookDeliveryStatus = (typeof webhookDeliveryStatus.enumValues)[number];

/**
 * Receivers of the webhooks (WEBHOOK_URLS), written by each process at start from its configuration. The outbox
 * makes deliveries only for active endpoints, so with none configured an event costs one index probe and no row.
 */
export const webhookEndpoints = pgTable("webhook_endpoints", {
  url: text("url").primaryKey(),
  active: boolean("active").notNull().default(true),
  createdAt: ts("created_at").notNull().defaultNow(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});
export type WebhookEndpoint = typeof webhookEndpoints.$inferSelect;

/**
 * The transactional outbox (decisions.md "Operators are told"): one row per event, written in the same transaction
 * as the change it announces (db/functions/webhooks.sql). `id` is the `webhook-id` of every delivery and retry.
 * `data` is a snapshot taken at that moment; `seq` orders the events of one request.
 */
export const webhookEvents = pgTable(
  "webhook_events",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    seq: bigint("seq", { mode: "number" }).notNull().generatedAlwaysAsIdentity(),
    type: text("type").notNull(),
    /** The request a `sponsorship.*` event is about (its deliveries keep its order per endpoint). */
    sponsorshipRequestId: uuid("sponsorship_request_id"),
    data: jsonb("data").$type<Record<string, unknown>>().notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [index("webhook_events_created_idx").on(t.createdAt)],
);
export type WebhookEvent = typeof webhookEvents.$inferSelect;

/** One row per (event, endpoint): each endpoint is retried on its own schedule, independent of the others. */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    eventId: uuid("event_id")
      .notNull()
      .references(() => webhookEvents.id, { onDelete: "cascade" }),
    endpoint: text("endpoint").notNull(),
    /** Copied from the event: a delivery waits while an earlier event of the same request is pending there. */
    sponsorshipRequestId: uuid("sponsorship_request_id"),
    eventSeq: bigint("event_seq", { mode: "number" }).notNull(),
    status: webhookDeliveryStatus("status").notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    /** Due time of the next attempt; while an attempt is in flight, the end of its claim. */
    nextAttemptAt: ts("next_attempt_at").notNull().defaultNow(),
    lastAttemptAt: ts("last_attempt_at"),
    lastStatusCode: integer("last_status_code"),
    lastError: text("last_error"),
    deliveredAt: ts("delivered_at"),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("webhook_deliveries_event_endpoint_key").on(t.eventId, t.endpoint),
    index("webhook_deliveries_due_idx")
      .on(t.endpoint, t.nextAttemptAt)
      .where(sql`${t.status} = 'pending'`),
    index("webhook_deliveries_request_order_idx")
      .on(t.endpoint, t.sponsorshipRequestId, t.eventSeq)
      .where(sql`${t.status} = 'pending'`),
    index("webhook_deliveries_recent_idx").on(t.endpoint, t.createdAt.desc()),
  ],
);
export type WebhookDelivery = typeof webhookDeliveries.$inferSelect;

/**
 * Alerts (treasury.low, fees.above_ceiling, ...): one row per alert key, so an alert is sent once when its condition
 * starts and again only after it ended, however many processes watch it (db/functions/webhooks.sql, webhook_report_alert).
 */
export const alertState = pgTable("alert_state", {
  key: text("key").primaryKey(),
  type: text("type").notNull(),
  active: boolean("active").notNull(),
  since: ts("since").notNull().defaultNow(),
  endedAt: ts("ended_at"),
  /**
   * An active alert whose condition was last seen clear: since when (its first clear observation after the last one
   * that saw it hold). It ends once clear for the caller's clear time (webhook_report_alert's p_clear_ms).
   */
  clearSince: ts("clear_since"),
  data: jsonb("data").$type<Record<string, unknown>>().notNull().default({}),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});
export type AlertState = typeof alertState.$inferSelect;
