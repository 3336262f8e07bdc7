import { randomUUID } from "node:crypto";
import type { Database } from "@/db/client";
import { createRequestInDatabase, type CreationCallResult, type RequestView } from "@/db/queries/sponsorship-requests";
import { wakeWorkers } from "@/db/queries/wakeup";
import type { Config } from "@/lib/config";
import { storedUserAgent } from "@/lib/http/user-agent";
import { log } from "@/lib/log";
import type { Address } from "./address";
import { now as clockNow } from "./clock";
import { clientIdentity, clientNetwork } from "./client-identity";
import { PAUSED_RETRY_AFTER_SECONDS } from "./faucet-gate";
import { SponsorshipError } from "./errors";
import { rateWindowStart, retryAfterSeconds, secondsUntil } from "./rate-limits";
import { replayWindowStart } from "./replay";

/**
 * POST /sponsorship/request (interface-spec 4.4, decisions.md). The order of checks is the decisions': body
 * validation (the route), then pause (503), administrator IP block (403), global budget (429 budget_exhausted),
 * then IP block/limit, wallet registered, replay, wallet block/limit, open request (409), already sponsored (422:
 * a completed request, or the registry's mirror).
 *
 * Where each rule runs (the map of every rule: rules.ts): all of them inside PostgreSQL, in one prepared round trip to the function
 * `create_sponsorship_request` (db/functions/create_sponsorship_request.sql), under two advisory locks (the client
 * identity's and the wallet's), so counters, blocks, the replay window and "one open request per wallet" hold under
 * any concurrency and across app instances; the partial unique index on open requests is the database's own
 * guarantee behind the lock. The identity is computed here (client-identity.ts); rate-limits.ts holds the window
 * arithmetic; the pause and IP blocks are kept by controls.ts; the budget's counters by
 * db/functions/sponsorship_budget.sql. No chain call is made: "already sponsored on-chain" comes from the registry's
 * mirror, which the worker keeps (worker/registry-index.ts); review asks the chain itself. A created request wakes
 * the workers after the commit (db/queries/wakeup.ts).
 *
 * Counting: every validated request past the budget counts against the client identity and (once the wallet is
 * known and not rate-limited) the wallet, refusals (404, 409, 422) included; a replay, a 429, a pause, an IP block
 * and a budget refusal count nothing.
 */

export type CreateRequestInput = { walletAddress: Address; ip: string; userAgent: string | null };
export type CreateRequestDeps = {
  config: Config;
  /** The registry whose mirror answers "sponsored on-chain" (lib/chain/deployment.ts), lowercase; undefined: none. */
  registryAddress?: string;
  now?: Date;
};
export type CreateRequestResult = { outcome: "created" | "replayed"; request: RequestView };

function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    if (typeof e === "object" && (e as { code?: unknown }).code === "23505") return true;
  }
  return false;
}

export async function createSponsorshipRequest(db: Database, input: CreateRequestInput, deps: CreateRequestDeps): Promise<CreateRequestResult> {
  const { config } = deps;
  const at = deps.now ?? clockNow();
  const { walletAddress: address, ip } = input;
  const userAgent = storedUserAgent(input.userAgent);
  const requestId = randomUUID();
  let result: CreationCallResult;
  try {
    result = await createRequestInDatabase(db, {
      ip,
      clientKey: clientIdentity(ip, config.ipv6PrefixLength),
      clientNetwork: clientNetwork(ip, config.ipv6PrefixLength),
      address,
      now: at,
      ipLimit: config.rateLimitIpPerHour,
      walletLimit: config.rateLimitWalletPerHour,
      windowStart: rateWindowStart(at),
      replayStart: replayWindowStart(at, config.replayWindowMs),
      autoBlockMinutes: config.autoBlockMinutes,
      ipBlockReason: `more than ${config.rateLimitIpPerHour} sponsorship requests within an hour`,
      walletBlockReason: `more than ${config.rateLimitWalletPerHour} sponsorship requests within an hour`,
      requestId,
      userAgent,
      registryAddress: deps.registryAddress ?? null,
      budgetPerHour: config.sponsorBudgetPerHour,
      budgetPerDay: config.sponsorBudgetPerDay,
      // On the database's clock, as the budget: the function uses it only while it is still ahead of its now.
      budgetRetryHintMs: budgetRetryAtMs > 0 ? budgetRetryAtMs : null,
    });
  } catch (error) {
    // The partial unique index caught a second open request the lock did not (another writer): still a 409.
    if (isUniqueViolation(error)) {
      throw new SponsorshipError("request_open", "A request for this wallet is still pending, approved or relayed");
    }
    throw error;
  }
  if ("refusal" in result) {
    switch (result.refusal) {
      case "rate_limited":
        throw new SponsorshipError(
          "rate_limited",
          result.subject === "ip" ? "Too many requests from this address; retry later" : "Too many requests for this wallet; retry later",
          secondsUntil(at, result.retryAtMs),
        );
      case "budget_exhausted":
        budgetRetryAtMs = result.retryAtMs;
        // The wait as the database counted it (the budget is on its clock): this server's clock is not subtracted.
        throw new SponsorshipError(
          "budget_exhausted",
          `This faucet has handed out its budget for the ${result.window}; retry later`,
          result.retryInMs === undefined ? secondsUntil(at, result.retryAtMs) : retryAfterSeconds(result.retryInMs),
        );
      case "sponsorships_paused":
        throw new SponsorshipError("sponsorships_paused", "Sponsorships are paused by the operator; retry later", PAUSED_RETRY_AFTER_SECONDS);
      case "ip_blocked":
        throw new SponsorshipError("ip_blocked", "Requests from this address are blocked by the operator");
      case "wallet_not_registered":
        throw new SponsorshipError("wallet_not_registered", `Register ${address} with POST /wallets/register first`);
      default:
        throw new SponsorshipError(result.refusal, refusalMessages[result.refusal]);
    }
  }
  if (result.outcome === "replayed") return { outcome: "replayed", request: result.request };
  // Committed: the workers are told at once (coalesced; they poll anyway if this is lost).
  wakeWorkers(db, (error) => log.warn("waking the workers failed; they will find the request at their next poll", { error }));
  return {
    outcome: "created",
    request: {
      id: requestId,
      walletId: result.walletId,
      walletAddress: address,
      status: "pending",
      requestedAt: at.toISOString(),
      approvedAt: null,
      rejectedAt: null,
      completedAt: null,
      failedAt: null,
      ipAddress: ip,
      userAgent,
      eligibilityReason: null,
    },
  };
}

/**
 * When this process was last told the budget has room again (epoch ms): handed back to the function while it is
 * ahead, so a client hammering a spent budget does not make it walk the window each time.
 */
let budgetRetryAtMs = 0;

const refusalMessages: Record<"wallet_blocked" | "request_open" | "already_sponsored", string> = {
  wallet_blocked: "This wallet is blocked and cannot be sponsored",
  request_open: "A request for this wallet is still pending, approved or relayed",
  already_sponsored: "This wallet has already been sponsored",
};
