import { z } from "zod";
import { ADDRESS_PATTERN } from "./address";
import { REQUEST_STATUSES } from "./status";

/**
 * The wire format of every endpoint, as zod schemas. The route handlers parse their input with them, their
 * results are typed by them, the tests parse every response with them, and lib/openapi.ts generates the OpenAPI
 * document from them, so the document cannot drift from the code.
 */

/** The named schemas of the API: lib/openapi.ts emits each as `#/components/schemas/<id>`. */
export const apiSchemas = z.registry<{ id: string }>();
function named<T extends z.ZodType>(id: string, schema: T): T {
  apiSchemas.add(schema, { id });
  return schema;
}

/* ------------------------------------------------------------------ primitives */

export const walletAddressInput = z
  .string()
  .max(42)
  .regex(ADDRESS_PATTERN)
  .meta({ description: "0x followed by 40 hex characters, any case", example: "0x52908400098527886E0F7030069857D2E4169EE7" });

const walletAddressOutput = z
  .string()
  .regex(/^0x[0-9a-f]{40}$/)
  .meta({ description: "Lowercase address", example: "0x52908400098527886e0f7030069857d2e4169ee7" });

/** A canonical UUID, 8-4-4-4-12 hex digits, any case (no version check: ids are compared, not interpreted). */
export const uuid = z.guid().meta({ example: "0b7e3c52-8d6f-4c1e-9a57-3f2d1c0e9b8a" });

export const transactionHashParam = z.string().min(1).max(1024).meta({ description: "Any string of 1 to 1,024 characters; matched case-insensitively" });

/** ISO 8601 in UTC with milliseconds (`2026-11-22T10:00:00.000Z`). */
const timestamp = z.iso.datetime({ precision: 3 }).meta({ example: "2026-11-22T10:00:00.000Z" });
const nullableTimestamp = timestamp.nullable();

export const requestStatus = named("RequestStatus", z.enum(REQUEST_STATUSES));
export const eligibilityReason = named(
  "EligibilityReason",
  z
    .enum(["eligible", "wallet_blocked", "already_sponsored", "payment_refused"])
    .nullable()
    .meta({ description: "null until the pipeline reviews the request" }),
);
export const relayStatus = named("RelayStatus", z.enum(["queued", "submitted", "confirmed", "failed"]));

/* ---------------------------------------------------------------- request bodies */

/** POST /wallets/register and POST /sponsorship/request: exactly `{ walletAddress }`. */
export const walletAddressBody = named("WalletAddressBody", z.strictObject({ walletAddress: walletAddressInput }));
export type WalletAddressBody = z.infer<typeof walletAddressBody>;

/** GET /wallets/:address/history query. */
export const historyQuery = z.object({
  cursor: uuid.optional().meta({ description: "The id of the last item of the previous page; omit to start at the newest" }),
  limit: z.int().min(1).max(100).default(50).meta({ description: "Page size, 1 to 100" }),
});

/* --------------------------------------------------------------------- responses */

export const walletResponse = named(
  "Wallet",
  z.strictObject({
    id: uuid,
    walletAddress: walletAddressOutput,
    firstSeenAt: timestamp,
    lastSeenAt: timestamp,
    sponsorshipCount: z.int().nonnegative().meta({ description: "Requests ever created (201) for the wallet" }),
    isBlocked: z.boolean(),
  }),
);
export type WalletResponse = z.infer<typeof walletResponse>;

/** The 201 of POST /sponsorship/request (and the 200 of a replay): the union of the spec's two variants. */
export const sponsorshipRequestResponse = named(
  "SponsorshipRequest",
  z.strictObject({
    id: uuid,
    walletId: uuid,
    walletAddress: walletAddressOutput,
    status: requestStatus,
    requestedAt: timestamp,
    approvedAt: nullableTimestamp,
    rejectedAt: nullableTimestamp,
    completedAt: nullableTimestamp,
    failedAt: nullableTimestamp,
    ipAddress: z.string(),
    userAgent: z.string().nullable(),
    eligibilityReason,
  }),
);
export type SponsorshipRequestResponse = z.infer<typeof sponsorshipRequestResponse>;

const relayFields = {
  id: uuid,
  status: relayStatus,
  relayAttempt: z.int().min(1),
  transactionHash: z
    .string()
    .regex(/^0x[0-9a-f]{64}$/)
    .nullable(),
  submittedAt: nullableTimestamp,
  confirmedAt: nullableTimestamp,
  failedAt: nullableTimestamp,
  failureReason: z.string().nullable(),
};

export const relayTransactionResponse = named("RelayTransaction", z.strictObject({ ...relayFields, sponsorshipRequestId: uuid }));
export type RelayTransactionResponse = z.infer<typeof relayTransactionResponse>;

export const relayTransactionSummary = named("RelayTransactionSummary", z.strictObject(relayFields));
export type RelayTransactionSummary = z.infer<typeof relayTransactionSummary>;

/**
 * GET /sponsorship/:id and GET /sponsorship/tx/:hash: the full guided-flow record. Its IP address and User-Agent are
 * answered to the client the request came from alone (lib/sponsorship/reads.ts), and a request that ended longer
 * ago than IP_RETENTION_DAYS has lost them (db/queries/ip-retention.ts): both null. The 201 and the replay of
 * POST /sponsorship/request always carry the address (an open request, or one of seconds ago).
 */
export const sponsorshipRequestDetailResponse = named(
  "SponsorshipRequestDetail",
  sponsorshipRequestResponse.extend({
    ipAddress: z.string().nullable().meta({
      description:
        "The requester's IP address, answered only to the client the request came from (null for anyone else); null too once the request ended longer ago than the operator's IP retention (IP_RETENTION_DAYS)",
    }),
    userAgent: z.string().nullable().meta({
      description:
        "The requester's User-Agent, answered only to the client the request came from (null for anyone else), null without the header; null too once the request ended longer ago than the IP retention",
    }),
    wallet: z.strictObject({
      id: uuid,
      walletAddress: walletAddressOutput,
      sponsorshipCount: z.int().nonnegative(),
      isBlocked: z.boolean(),
    }),
    relayTransactions: z.array(relayTransactionSummary).meta({ description: "Ordered by relayAttempt; [] while none exists" }),
  }),
);
export type SponsorshipRequestDetailResponse = z.infer<typeof sponsorshipRequestDetailResponse>;

/**
 * GET /sponsorship/tx/:hash: the same record with `ipAddress` and `userAgent` always null (decisions.md,
 * "Privacy"): a transaction hash is public, so it must not link a sponsored wallet to the requester's IP.
 */
export const sponsorshipRequestByTransactionResponse = named(
  "SponsorshipRequestByTransaction",
  sponsorshipRequestDetailResponse.extend({
    ipAddress: z.null().meta({ description: "Always null here: a transaction hash is public (GET /sponsorship/{id} shows it to the requester)" }),
    userAgent: z.null().meta({ description: "Always null here: a transaction hash is public (GET /sponsorship/{id} shows it to the requester)" }),
  }),
);
export type SponsorshipRequestByTransactionResponse = z.infer<typeof sponsorshipRequestByTransactionResponse>;

export const historyItem = named(
  "HistoryItem",
  z.strictObject({
    id: uuid,
    walletId: uuid,
    status: requestStatus,
    requestedAt: timestamp,
    approvedAt: nullableTimestamp,
    completedAt: nullableTimestamp,
    failedAt: nullableTimestamp,
    rejectedAt: nullableTimestamp,
  }),
);
export type HistoryItem = z.infer<typeof historyItem>;

export const historyResponse = named(
  "HistoryPage",
  z.strictObject({
    requests: z.array(historyItem).meta({ description: "Newest first (requestedAt desc, then id desc)" }),
    nextCursor: uuid.nullable().meta({ description: "Pass as cursor for the next page; null on the last page" }),
  }),
);
export type HistoryResponse = z.infer<typeof historyResponse>;

/**
 * Why a health check is not `ok`: a short, stable code (issue 11). `/health` never carries an error's own text
 * (it names hosts and database users); the web server's log keeps it.
 */
export const healthCheckCode = named(
  "HealthCheckCode",
  z
    .enum([
      "unreachable",
      "timeout",
      "auth_failed",
      "starting_up",
      "too_many_connections",
      "rpc_error",
      "error",
      "chain_down",
      "database_down",
      "no_heartbeat",
      "heartbeat_stale",
      "relayers_without_gas",
      "relayers_not_authorised",
      "underfunded",
      "treasury_paused",
      "no_deployment",
      "fees_above_ceiling",
      "endpoints_down",
      "endpoints_behind",
      "endpoints_other_chain",
    ])
    .meta({ description: "Why the check is not ok; clients switch on it. Absent when the check is ok" }),
);
export type HealthCheckCode = z.infer<typeof healthCheckCode>;

export const healthCheck = named(
  "HealthCheck",
  z.strictObject({
    status: z.enum(["ok", "degraded", "down", "not_configured"]),
    code: healthCheckCode.optional(),
    detail: z.string().optional().meta({ description: "A fixed sentence for people, one per code; never an error's text" }),
    latencyMs: z.number().nonnegative().optional(),
    chainId: z.int().optional(),
    blockNumber: z.string().optional().meta({ description: "Decimal string" }),
    lastBeatAt: timestamp.nullable().optional(),
    ageMs: z.int().optional(),
    balanceWei: z.string().optional().meta({ description: "Decimal string" }),
    requiredWei: z
      .string()
      .optional()
      .meta({ description: "What the treasury pays per sponsorship (its on-chain amount: SPONSOR_AMOUNT_WEI as deployed), decimal string" }),
    paused: z.boolean().optional(),
    reason: z.string().nullable().optional().meta({ description: "The administrator's reason for the pause" }),
    relayersWithoutGas: z
      .array(z.string())
      .optional()
      .meta({ description: "Relayer addresses whose broadcasts the node refused for want of gas money (worker check)" }),
    relayersNotAuthorised: z
      .array(z.string())
      .optional()
      .meta({ description: "Relayer addresses of a worker whose requests wait because the treasury authorises none of them (worker check)" }),
    baseFeeWei: z.string().optional().meta({ description: "Base fee per gas of the latest block, decimal string (fees check)" }),
    ceilingWei: z.string().optional().meta({ description: "MAX_FEE_PER_GAS_GWEI in wei, decimal string (fees check)" }),
    endpoints: z
      .array(
        z.strictObject({
          index: z
            .int()
            .min(1)
            .meta({ description: "Position of the endpoint in RPC_URL, from 1 (its address is not shown: it may name internal hosts or hold a key)" }),
          status: z.enum(["ok", "behind", "down", "other_chain"]).meta({
            description:
              "behind: answers, with a head more than 3 blocks below the best endpoint's, and one the best had passed over 3 s before (the worker reads from the others); other_chain: answers another chain's id than the service's (not read by the worker, its head not counted, until it answers the service's again)",
          }),
          code: healthCheckCode.optional(),
          blockNumber: z.string().optional(),
          latencyMs: z.number().nonnegative().optional(),
          chainId: z.int().optional().meta({ description: "The chain id it answered (other_chain only)" }),
        }),
      )
      .optional()
      .meta({ description: "Each RPC_URL endpoint, in order (chain check)" }),
  }),
);
export type HealthCheck = z.infer<typeof healthCheck>;

export const healthResponse = named(
  "Health",
  z.strictObject({
    status: z.enum(["ok", "degraded", "unavailable"]),
    uptime: z.int().nonnegative().meta({ description: "Seconds since the process started, rounded down" }),
    checks: z.strictObject({
      database: healthCheck,
      chain: healthCheck,
      worker: healthCheck,
      treasury: healthCheck,
      sponsorships: healthCheck.optional().meta({ description: "The administrator's pause: degraded (with the reason) while paused" }),
      fees: healthCheck.optional().meta({ description: "MAX_FEE_PER_GAS_GWEI against the base fee: degraded (fees_above_ceiling) while above it" }),
    }),
  }),
);
export type HealthResponse = z.infer<typeof healthResponse>;

export const problemResponseSchema = named(
  "Problem",
  z
    .object({
      type: z.string(),
      title: z.string(),
      status: z.int().min(400).max(599),
      detail: z.string(),
      code: z.string().regex(/^[a-z_]+$/),
      requestId: z.string().min(1).max(128),
      errors: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional(),
    })
    .meta({ description: "RFC 9457 problem details; clients switch on `code`" }),
);
export type ProblemResponse = z.infer<typeof problemResponseSchema>;

/** GET /faucet (decisions.md, "Public faucet status"). */
export const faucetState = named(
  "FaucetState",
  z
    .enum(["operating", "paused", "budget_exhausted", "low_funds", "empty", "chain_unreachable"])
    .meta({ description: "low_funds still serves requests (fewer than TREASURY_LOW_SPONSORSHIPS sponsorships are left); the others after operating do not" }),
);
export type FaucetState = z.infer<typeof faucetState>;

export const faucetStatusResponse = named(
  "FaucetStatus",
  z.strictObject({
    chainId: z.int().min(1),
    networkName: z.string().meta({ description: 'NETWORK_NAME; by default from the chain id ("Local development chain" for 31337)' }),
    nativeSymbol: z.string().meta({ example: "ETH" }),
    amountWei: z.string().regex(/^\d+$/).meta({
      description: "What one sponsorship sends: the treasury's own amount when the chain answers (SPONSOR_AMOUNT_WEI as deployed), decimal string",
      example: "10000000000000000",
    }),
    explorerUrl: z.string().nullable().meta({ description: "Block explorer base URL (transactions at `{explorerUrl}/tx/{hash}`), or null" }),
    state: faucetState,
    retryAfterSeconds: z
      .int()
      .min(1)
      .nullable()
      .meta({ description: "The seconds after which to look again (for low_funds, 60: it still serves); null only while operating" }),
    medianSecondsToComplete: z
      .number()
      .nonnegative()
      .nullable()
      .meta({ description: "Median seconds from requestedAt to completedAt of the requests completed in the last hour; null with none" }),
  }),
);
export type FaucetStatusResponse = z.infer<typeof faucetStatusResponse>;
