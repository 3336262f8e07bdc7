import type { Address, Hex } from "viem";
import path from "node:path";
import { z } from "zod";
import { developmentSecretsRefusal, LOCAL_RELAYER_KEYS } from "./local-chain";

/**
 * Every environment variable of the service, parsed once (decisions.md, "Configuration").
 * Nothing else in the code base reads `process.env` for settings: import `getConfig()`.
 */

// The local development chain's keys and id, and the rule that keeps them off real networks, live in
// lib/local-chain.ts; parseConfig applies that rule, and they are exported here too for the code that configures.
export { developmentSecretsRefusal, isLoopbackRpcUrl, LOCAL_CHAIN_ID, LOCAL_DEPLOYER_KEY, LOCAL_DEV_KEYS, LOCAL_RELAYER_KEYS } from "./local-chain";

/** The order of secp256k1's group: a private key is a number from 1 to this minus 1. */
const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const privateKey = z
  .string()
  .trim()
  .regex(/^0x[0-9a-fA-F]{64}$/, "must be 0x followed by 64 hex characters")
  // 64 hex characters that are no key (0, or the group's order or more) would pass here and throw in viem later,
  // in a worker that its supervisor restarts for ever.
  // zod runs a refinement after a failed check too: only 64 hex characters are read as a number (BigInt of anything
  // else throws, with the key in its message).
  .refine(
    (k) => !/^0x[0-9a-fA-F]{64}$/.test(k) || (BigInt(k) > 0n && BigInt(k) < SECP256K1_ORDER),
    "is not a valid secp256k1 private key (it must be between 1 and the curve order minus 1)",
  )
  .transform((k) => k.toLowerCase() as Hex);

const address = z
  .string()
  .trim()
  .regex(/^0x[0-9a-fA-F]{40}$/, "must be 0x followed by 40 hex characters")
  .transform((a) => a.toLowerCase() as Address);

const empty = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);
const optional = <T extends z.ZodType>(schema: T) => z.preprocess(empty, schema.optional());

const integer = (min: number, max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

const withDefault = <T extends z.ZodType>(schema: T, fallback: string) => z.preprocess((v) => empty(v) ?? fallback, schema);

const url = z
  .string()
  .trim()
  .refine((v) => {
    try {
      new URL(v);
      return true;
    } catch {
      return false;
    }
  }, "must be a URL");

const list = <T extends z.ZodType>(item: T) =>
  z.preprocess(
    (v) =>
      typeof v === "string"
        ? v
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "")
        : [],
    z.array(item),
  );

/**
 * A CORS origin: http(s) only. Another scheme's origin (`capacitor://localhost`, `chrome-extension://...`) is the
 * opaque "null", which the API never allows (lib/http/cors.ts): listed, it was silently refused.
 */
const origin = url
  .refine(
    (v) => !URL.canParse(v) || /^https?:$/.test(new URL(v).protocol),
    "must list http:// or https:// origins (other schemes' origins are opaque and never match)",
  )
  .transform((v) => new URL(v).origin);

/**
 * A configured administrator token must resist guessing (issue 11): at least 32 characters, at least 10 distinct
 * ones, and not one short piece repeated. `npm start` generates a random one (32 characters of base64url) when the
 * variable is unset; that one is kept as it is.
 */
export const ADMIN_TOKEN_MIN_LENGTH = 32;
const ADMIN_TOKEN_MIN_DISTINCT = 10;
const adminToken = z
  .string()
  // Surrounding whitespace (a secret file's trailing newline) is no part of the token: every form and bearer header
  // that carries it is trimmed too, so kept it would match none of them.
  .trim()
  .min(ADMIN_TOKEN_MIN_LENGTH, `must be at least ${ADMIN_TOKEN_MIN_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`)
  .refine((v) => new Set(v).size >= ADMIN_TOKEN_MIN_DISTINCT && !/^([\s\S]+?)\1+$/.test(v), {
    message: `has too little variety (fewer than ${ADMIN_TOKEN_MIN_DISTINCT} distinct characters, or a repeated pattern); use a random one (e.g. \`openssl rand -base64 32\`)`,
  });

/** Gwei with up to 9 decimals (1 wei), as wei. */
const gwei = z
  .string()
  .trim()
  .regex(/^\d+(\.\d{1,9})?$/, "must be a number of gwei (up to 9 decimals), 0 for none")
  .transform((v) => {
    const [whole, fraction = ""] = v.split(".");
    return BigInt(whole!) * 10n ** 9n + BigInt(fraction.padEnd(9, "0"));
  })
  .refine((v) => v < 2n ** 128n, "must be less than 2^128 wei");

/** A JSON-RPC endpoint: http:// or https:// only. */
const httpUrl = url.refine((v) => !URL.canParse(v) || /^https?:$/.test(new URL(v).protocol), "must be an http:// or https:// URL");

/** A PostgreSQL connection URL, as the driver reads it. */
const databaseUrl = url.refine(
  (v) => !URL.canParse(v) || /^postgres(ql)?:$/.test(new URL(v).protocol),
  "must be a postgres:// or postgresql:// URL (e.g. postgres://user:password@host:5432/database)",
);

/**
 * A webhook endpoint: http(s), without a user name or password. Fetch refuses to send to such a URL, so every event
 * would have been retried for 24 hours and given up, with the password in each delivery's stored error; a receiver
 * verifies the signature instead (and may hold a token in its path or query, which logs and the dashboard redact).
 */
const webhookUrl = httpUrl.refine(
  (v) => !URL.canParse(v) || (new URL(v).username === "" && new URL(v).password === ""),
  "must not carry a user name or password (https://user:pass@...): receivers verify the signature; a token may go in the path or query",
);

/**
 * WEBHOOK_SECRET (decisions.md "Operators are told"): `whsec_` followed by base64 of at least 24 bytes, the
 * Standard Webhooks format. The HMAC key is the decoded bytes.
 */
export const WEBHOOK_SECRET_MIN_BYTES = 24;
const webhookSecret = z
  .string()
  .trim()
  .refine((v) => {
    const m = /^whsec_([A-Za-z0-9+/]+={0,2})$/.exec(v);
    return m !== null && m[1]!.length % 4 === 0 && Buffer.from(m[1]!, "base64").length >= WEBHOOK_SECRET_MIN_BYTES;
  }, `must be whsec_ followed by base64 of at least ${WEBHOOK_SECRET_MIN_BYTES} random bytes (e.g. \`echo whsec_$(openssl rand -base64 32)\`)`);

const envSchema = z.object({
  PORT: withDefault(integer(1, 65535), "3000"),
  DATABASE_URL: optional(databaseUrl),
  /** One endpoint, or several of the same chain, comma-separated (reads fail over, broadcasts go to all). */
  RPC_URL: list(httpUrl),
  CHAIN_ID: optional(integer(1, Number.MAX_SAFE_INTEGER)),
  /**
   * JSON-RPC calls one batched HTTP request carries at most; more are split over several requests. A provider that
   * refuses larger batches as a whole (`-32600 batch too large`) would otherwise refuse every review's dry runs and
   * every broadcast of a full relay pass, for ever. 1: no batches, each call its own request.
   */
  RPC_BATCH_SIZE: withDefault(integer(1, 1_000), "200"),
  RELAYER_PRIVATE_KEYS: list(privateKey),
  DEPLOYER_PRIVATE_KEY: optional(privateKey),
  REGISTRY_ADDRESS: optional(address),
  TREASURY_ADDRESS: optional(address),
  SPONSOR_AMOUNT_WEI: withDefault(
    z
      .string()
      .trim()
      .regex(/^\d+$/, "must be a whole number of wei")
      .transform((v) => BigInt(v))
      .refine((v) => v > 0n, "must be greater than 0")
      // The treasury stores the amount in 128 bits (its setAmount refuses more).
      .refine((v) => v < 2n ** 128n, "must be less than 2^128"),
    "10000000000000000",
  ),
  WORKER_INTERVAL_MS: withDefault(integer(10, 3_600_000), "5000"),
  /**
   * After a pass over the queue (review, relay), the worker starts the next one no sooner than this, unless the
   * last batch was full: requests arriving meanwhile are reviewed and relayed together (fewer commits and JSON-RPC
   * requests per sponsorship) at the price of up to this much more latency. 0: each creation wakes it at once.
   */
  WORKER_BATCH_WINDOW_MS: withDefault(integer(0, 10_000), "50"),
  /**
   * Connections of each web server's database pool. Concurrent creations commit together (one WAL flush for
   * several), so a pool as large as the concurrency the server sees costs PostgreSQL less per request.
   */
  DATABASE_POOL_SIZE: withDefault(integer(1, 500), "20"),
  /** Requests per stage batch of the worker (review, relay). */
  WORKER_BATCH_SIZE: withDefault(integer(1, 1_000), "200"),
  /** Test hook only: the worker kills itself (SIGKILL) right after its N-th accepted broadcast. */
  WORKER_TEST_CRASH_AFTER_BROADCASTS: optional(integer(1, 1_000_000)),
  RATE_LIMIT_IP_PER_HOUR: withDefault(integer(1, 1_000_000_000), "10"),
  RATE_LIMIT_WALLET_PER_HOUR: withDefault(integer(1, 1_000_000_000), "5"),
  REGISTER_LIMIT_IP_PER_HOUR: withDefault(integer(1, 1_000_000_000), "100"),
  /** An IPv6 client's limit identity is its prefix of this length (decisions.md, "On the open internet"). */
  IPV6_PREFIX_LENGTH: withDefault(integer(32, 128), "64"),
  /** Sponsorship requests the whole service may create per rolling hour / day; 0: no budget. */
  SPONSOR_BUDGET_PER_HOUR: withDefault(integer(0, 1_000_000_000), "0"),
  SPONSOR_BUDGET_PER_DAY: withDefault(integer(0, 1_000_000_000), "0"),
  AUTO_BLOCK_MINUTES: withDefault(integer(1, 525_600), "15"),
  REPLAY_WINDOW_MS: withDefault(integer(0, 3_600_000), "5000"),
  MAX_RELAY_ATTEMPTS: withDefault(integer(1, 100), "5"),
  RELAY_TIMEOUT_MS: withDefault(integer(100, 86_400_000), "60000"),
  /** decisions.md "Fee ceiling": no relay is signed with a maxFeePerGas above it. 0: no ceiling. */
  MAX_FEE_PER_GAS_GWEI: withDefault(gwei, "0"),
  /**
   * Blocks a relay transaction must be buried under before its request is completed: 1 is its own block. A public
   * network can drop its newest blocks (a reorg); a request completed before that would say paid when it was not.
   */
  CONFIRMATIONS: withDefault(integer(1, 64), "1"),
  /**
   * Days the requesters' and administrators' IP addresses and User-Agents are kept once what they belong to has ended
   * (docs/deployment.md, "Personal data and how long it is kept"); 0: kept for ever. db/queries/ip-retention.ts.
   */
  IP_RETENTION_DAYS: withDefault(integer(0, 36_500), "90"),
  TRUST_PROXY: withDefault(integer(0, 32), "0"),
  CORS_ORIGINS: list(origin),
  ADMIN_TOKEN: optional(adminToken),
  DATA_DIR: withDefault(z.string().trim().min(1), ".data"),
  EMBEDDED_PG_PORT: withDefault(integer(1, 65535), "54329"),
  LOCAL_CHAIN_PORT: withDefault(integer(1, 65535), "8545"),
  LOCAL_BLOCK_TIME: withDefault(integer(0, 3600), "1"),
  /** The web server's loopback metrics port; the worker's is the next one, so at most 65534. */
  METRICS_PORT: optional(integer(0, 65534)),
  /** Published in GET /faucet and linked from the pages: http(s) only. */
  EXPLORER_URL: optional(httpUrl),
  /**
   * The chain's JSON-RPC URL a user's browser wallet may use ("Add <network> to your wallet" on /request). Unset: the
   * first RPC_URL when every endpoint is loopback (npm start's local chain), else none and no button: RPC_URL may
   * carry a provider key and is never shown to browsers.
   */
  PUBLIC_RPC_URL: optional(httpUrl),
  /** The network's name on /request and in GET /faucet (unset: from the chain id, "Local development chain" for 31337). */
  NETWORK_NAME: optional(z.string().trim().min(1).max(100)),
  /** GET /faucet says `low_funds` while the treasury holds fewer sponsorships than this (decisions: treasury.low). */
  TREASURY_LOW_SPONSORSHIPS: withDefault(integer(0, 1_000_000_000), "100"),
  /** Receivers of the webhooks (decisions.md "Operators are told"), comma-separated; empty: none. */
  WEBHOOK_URLS: list(webhookUrl),
  /** Signs every webhook (Standard Webhooks); required when WEBHOOK_URLS is set. */
  WEBHOOK_SECRET: optional(webhookSecret),
  /** Set by `npm start` for its children only: they stop when that process is gone. */
  SUPERVISOR_PID: optional(integer(1, 2 ** 31)),
  LOG_LEVEL: withDefault(z.enum(["debug", "info", "warn", "error", "silent"]), "info"),
});

/** Every environment variable the service reads (each is listed, with its default, in .env.example). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export type Config = Readonly<{
  port: number;
  /** Unset: `npm start` starts an embedded PostgreSQL and sets it for its children. */
  databaseUrl: string | undefined;
  /** The first of `rpcUrls`. Unset: `npm start` starts a local anvil chain and sets it for its children. */
  rpcUrl: string | undefined;
  /** Every endpoint of RPC_URL, in order (empty when unset): reads fail over in this order, broadcasts go to all. */
  rpcUrls: readonly string[];
  chainId: number | undefined;
  /** JSON-RPC calls per batched HTTP request at most (RPC_BATCH_SIZE). */
  rpcBatchSize: number;
  relayerPrivateKeys: readonly Hex[];
  deployerPrivateKey: Hex | undefined;
  registryAddress: Address | undefined;
  treasuryAddress: Address | undefined;
  sponsorAmountWei: bigint;
  workerIntervalMs: number;
  workerBatchWindowMs: number;
  workerBatchSize: number;
  databasePoolSize: number;
  /** Test hook: SIGKILL the worker right after its N-th accepted broadcast (before it records the broadcast). */
  workerTestCrashAfterBroadcasts: number | undefined;
  rateLimitIpPerHour: number;
  rateLimitWalletPerHour: number;
  registerLimitIpPerHour: number;
  ipv6PrefixLength: number;
  /** 0: no budget for that window. */
  sponsorBudgetPerHour: number;
  sponsorBudgetPerDay: number;
  autoBlockMinutes: number;
  replayWindowMs: number;
  maxRelayAttempts: number;
  relayTimeoutMs: number;
  /** MAX_FEE_PER_GAS_GWEI in wei; undefined: no ceiling. */
  maxFeePerGasWei: bigint | undefined;
  confirmations: number;
  /** IP_RETENTION_DAYS: 0 keeps IP addresses and User-Agents for ever. */
  ipRetentionDays: number;
  trustProxy: number;
  corsOrigins: readonly string[];
  adminToken: string | undefined;
  /** Absolute path. */
  dataDir: string;
  embeddedPgPort: number;
  localChainPort: number;
  localBlockTime: number;
  metricsPort: number | undefined;
  /** EXPLORER_URL without trailing slashes: transactions are at `${explorerUrl}/tx/${hash}`. */
  explorerUrl: string | undefined;
  publicRpcUrl: string | undefined;
  networkName: string | undefined;
  treasuryLowSponsorships: number;
  /** WEBHOOK_URLS, in order, without duplicates (empty: no webhooks). */
  webhookUrls: readonly string[];
  /** WEBHOOK_SECRET (`whsec_...`); set whenever `webhookUrls` is not empty. */
  webhookSecret: string | undefined;
  logLevel: "debug" | "info" | "warn" | "error" | "silent";
  supervisorPid: number | undefined;
}>;

/** A configuration error: its message is one line that names the variable. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export function parseConfig(env: Record<string, string | undefined>): Config {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    const issue = result.error.issues[0];
    const variable = issue?.path.join(".") ?? "environment";
    throw new ConfigError(`Invalid configuration: ${variable} ${issue?.message ?? "is invalid"}`);
  }
  const e = result.data;
  if ((e.REGISTRY_ADDRESS === undefined) !== (e.TREASURY_ADDRESS === undefined)) {
    const missing = e.REGISTRY_ADDRESS === undefined ? "REGISTRY_ADDRESS" : "TREASURY_ADDRESS";
    throw new ConfigError(`Invalid configuration: ${missing} is missing (REGISTRY_ADDRESS and TREASURY_ADDRESS go together)`);
  }
  if (e.WEBHOOK_URLS.length > 0 && e.WEBHOOK_SECRET === undefined) {
    throw new ConfigError("Invalid configuration: WEBHOOK_SECRET must be set when WEBHOOK_URLS is set (whsec_ followed by base64 of at least 24 random bytes)");
  }
  const config: Config = Object.freeze({
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    rpcUrl: e.RPC_URL[0],
    rpcUrls: Object.freeze([...e.RPC_URL]),
    chainId: e.CHAIN_ID,
    rpcBatchSize: e.RPC_BATCH_SIZE,
    relayerPrivateKeys: Object.freeze(e.RELAYER_PRIVATE_KEYS.length > 0 ? e.RELAYER_PRIVATE_KEYS : e.RPC_URL.length > 0 ? [] : [...LOCAL_RELAYER_KEYS]),
    deployerPrivateKey: e.DEPLOYER_PRIVATE_KEY,
    registryAddress: e.REGISTRY_ADDRESS,
    treasuryAddress: e.TREASURY_ADDRESS,
    sponsorAmountWei: e.SPONSOR_AMOUNT_WEI,
    workerIntervalMs: e.WORKER_INTERVAL_MS,
    workerBatchWindowMs: e.WORKER_BATCH_WINDOW_MS,
    workerBatchSize: e.WORKER_BATCH_SIZE,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    workerTestCrashAfterBroadcasts: e.WORKER_TEST_CRASH_AFTER_BROADCASTS,
    rateLimitIpPerHour: e.RATE_LIMIT_IP_PER_HOUR,
    rateLimitWalletPerHour: e.RATE_LIMIT_WALLET_PER_HOUR,
    registerLimitIpPerHour: e.REGISTER_LIMIT_IP_PER_HOUR,
    ipv6PrefixLength: e.IPV6_PREFIX_LENGTH,
    sponsorBudgetPerHour: e.SPONSOR_BUDGET_PER_HOUR,
    sponsorBudgetPerDay: e.SPONSOR_BUDGET_PER_DAY,
    autoBlockMinutes: e.AUTO_BLOCK_MINUTES,
    replayWindowMs: e.REPLAY_WINDOW_MS,
    maxRelayAttempts: e.MAX_RELAY_ATTEMPTS,
    relayTimeoutMs: e.RELAY_TIMEOUT_MS,
    maxFeePerGasWei: e.MAX_FEE_PER_GAS_GWEI > 0n ? e.MAX_FEE_PER_GAS_GWEI : undefined,
    confirmations: e.CONFIRMATIONS,
    ipRetentionDays: e.IP_RETENTION_DAYS,
    trustProxy: e.TRUST_PROXY,
    corsOrigins: Object.freeze(e.CORS_ORIGINS),
    adminToken: e.ADMIN_TOKEN,
    dataDir: path.resolve(e.DATA_DIR),
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    localChainPort: e.LOCAL_CHAIN_PORT,
    localBlockTime: e.LOCAL_BLOCK_TIME,
    metricsPort: e.METRICS_PORT,
    explorerUrl: e.EXPLORER_URL?.replace(/\/+$/, ""),
    publicRpcUrl: e.PUBLIC_RPC_URL,
    networkName: e.NETWORK_NAME,
    treasuryLowSponsorships: e.TREASURY_LOW_SPONSORSHIPS,
    webhookUrls: Object.freeze([...new Set(e.WEBHOOK_URLS)]),
    webhookSecret: e.WEBHOOK_SECRET,
    logLevel: e.LOG_LEVEL,
    supervisorPid: e.SUPERVISOR_PID,
  });
  const refusal = developmentSecretsRefusal(config, config.chainId);
  if (refusal) throw new ConfigError(refusal);
  return config;
}

/** Why `token` cannot be an administrator token (ADMIN_TOKEN's rules), or undefined when it can. */
export function adminTokenRefusal(token: string): string | undefined {
  const result = adminToken.safeParse(token);
  return result.success ? undefined : result.error.issues[0]?.message;
}

let cached: Config | undefined;

/** The process's configuration, parsed from `process.env` on first use. */
export function getConfig(): Config {
  cached ??= parseConfig(process.env);
  return cached;
}

/** Tests that change `process.env` call this so the next `getConfig()` parses again. */
export function resetConfigForTests(): void {
  cached = undefined;
}
