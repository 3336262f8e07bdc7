import { randomUUID } from "node:crypto";
import type { Database } from "@/db/client";
import { createRequestInDatabase, type CreationCallResult, type RequestView } from "@/db/queries/sponsorship-requests";
import { wakeWorkers } from "@/db/queries/wakeup";
import type { Config } from "@/lib/config";
import { log } from "@/lib/log";
import type { Address } from "./address";
import { now as clockNow } from "./clock";
import { checkSponsoredOnChain, type SponsoredReader } from "./eligibility";
import { SponsorshipError } from "./errors";
import { rateWindowStart, secondsUntil } from "./rate-limits";

/**
 * POST /sponsorship/request (interface-spec 4.4, decisions.md). The order of checks is the decisions':
 * body validation (the route), then IP block/limit, then wallet registered, then replay, then wallet
 * block/limit, then open request (409), then already sponsored (422: a completed request, or `isSponsored`
 * on-chain).
 *
 * One transaction under two advisory locks (the IP's and the wallet's), so counters, blocks, the replay window
 * and "one open request per wallet" hold under any concurrency and across app instances; the partial unique
 * index on open requests is the database's own guarantee behind the lock. One prepared round trip: the PL/pgSQL
 * function `create_sponsorship_request` (migration 0004, revised by 0006) takes the locks, reads,
 * decides in the order above and writes; this function supplies the time, limits, reasons, the new id and the
 * chain's answer, and turns the outcome into the answer or a SponsorshipError. The chain is asked first (its
 * answer is a parameter); if it cannot be reached the request is accepted as pending. A created request wakes
 * the workers after the commit (db/queries/wakeup.ts).
 *
 * Counting: every validated request counts against the IP and (once the wallet is known and not rate-limited)
 * the wallet, refusals (404, 409, 422) included; a replay counts nothing; a 429 counts nothing.
 */

/** User agents longer than this are cut (headers are client-controlled; the column is not a dumping ground). */
export const MAX_USER_AGENT_LENGTH = 512;

export type CreateRequestInput = { walletAddress: Address; ip: string; userAgent: string | null };
export type CreateRequestDeps = { config: Config; readIsSponsored?: SponsoredReader; now?: Date };
export type CreateRequestResult = { outcome: "created" | "replayed"; request: RequestView };

function isUniqueViolation(error: unknown): boolean {
  for (let e: unknown = error; e; e = (e as { cause?: unknown }).cause) {
    if (typeof e === "object" && (e as { code?: unknown }).code === "23505") return true;
  }
  return false;
}

export async function createSponsorshipRequest(
  db: Database,
  input: CreateRequestInput,
  deps: CreateRequestDeps,
): Promise<CreateRequestResult> {
  const { config } = deps;
  const at = deps.now ?? clockNow();
  const { walletAddress: address, ip } = input;
  const userAgent = input.userAgent === null ? null : input.userAgent.slice(0, MAX_USER_AGENT_LENGTH);
  // Awaited before the one database round trip (its answer is a parameter): no lock is held while the chain
  // answers. "unknown" (no chain, unreachable, timed out, backing off) is accepted as pending.
  const onChain = await checkSponsoredOnChain(deps.readIsSponsored, address);

  const requestId = randomUUID();
  let result: CreationCallResult;
  try {
    result = await createRequestInDatabase(db, {
      ip,
      address,
      now: at,
      ipLimit: config.rateLimitIpPerHour,
      walletLimit: config.rateLimitWalletPerHour,
      windowStart: rateWindowStart(at),
      replayStart: new Date(at.getTime() - config.replayWindowMs),
      autoBlockMinutes: config.autoBlockMinutes,
      ipBlockReason: `more than ${config.rateLimitIpPerHour} sponsorship requests within an hour`,
      walletBlockReason: `more than ${config.rateLimitWalletPerHour} sponsorship requests within an hour`,
      requestId,
      userAgent,
      onChainSponsored: onChain === "unknown" ? null : onChain === "sponsored",
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

const refusalMessages: Record<"wallet_blocked" | "request_open" | "already_sponsored", string> = {
  wallet_blocked: "This wallet is blocked and cannot be sponsored",
  request_open: "A request for this wallet is still pending, approved or relayed",
  already_sponsored: "This wallet has already been sponsored",
};
