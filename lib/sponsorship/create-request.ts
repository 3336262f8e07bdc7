import { randomUUID } from "node:crypto";
import type { Database } from "@/db/client";
import { attemptCreation, type CreationState, type CreationWrites, type RequestView } from "@/db/queries/sponsorship-requests";
import type { Config } from "@/lib/config";
import type { Address } from "./address";
import { now as clockNow } from "./clock";
import { checkSponsoredOnChain, type SponsoredReader } from "./eligibility";
import { SponsorshipError, type SponsorshipErrorCode } from "./errors";
import { sponsorshipIpLockKey, walletLockKey } from "./lock-keys";
import { judgeLimit, rateWindowStart } from "./rate-limits";

/**
 * POST /sponsorship/request (interface-spec 4.4, decisions.md). The order of checks is the decisions':
 * body validation (the route), then IP block/limit, then wallet registered, then replay, then wallet
 * block/limit, then open request (409), then already sponsored (422: a completed request, or `isSponsored`
 * on-chain).
 *
 * One transaction under two advisory locks (the IP's and the wallet's), so counters, blocks, the replay window
 * and "one open request per wallet" hold under any concurrency and across app instances; the partial unique
 * index on open requests is the database's own guarantee behind the lock. Two round trips: BEGIN + locks + one
 * read of every fact, then one write of the outcome + COMMIT (db/queries/two-step-transaction.ts); the rules
 * below decide in between. The chain is asked in parallel with the database work and only its answer is
 * awaited at the last step; if it cannot be reached the request is accepted as pending.
 *
 * Counting: every validated request counts against the IP and (once the wallet is known and not rate-limited)
 * the wallet, refusals (404, 409, 422) included; a replay counts nothing; a 429 counts nothing.
 */

/** User agents longer than this are cut (headers are client-controlled; the column is not a dumping ground). */
export const MAX_USER_AGENT_LENGTH = 512;

export type CreateRequestInput = { walletAddress: Address; ip: string; userAgent: string | null };
export type CreateRequestDeps = { config: Config; readIsSponsored?: SponsoredReader; now?: Date };
export type CreateRequestResult = { outcome: "created" | "replayed"; request: RequestView };

type Refusal = { refusal: SponsorshipErrorCode; message: string; retryAfterSeconds?: number };
type Outcome = Refusal | CreateRequestResult;

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
  // Leaves now, overlapping the database work; awaited only if every other check passes.
  const onChain = checkSponsoredOnChain(deps.readIsSponsored, address);

  const decide = async (s: CreationState): Promise<{ writes: CreationWrites; result: Outcome }> => {
    const writes: CreationWrites = { now: at, hits: [] };
    const refuse = (refusal: Refusal) => ({ writes, result: refusal });

    // IP block / limit.
    const ipVerdict = judgeLimit(
      { blockedForever: s.ipBlockedForever, blockedUntilMs: s.ipBlockedUntilMs, limitReachedAtMs: s.ipLimitReachedAtMs },
      at,
      config.autoBlockMinutes,
    );
    if (ipVerdict.limited) {
      if (ipVerdict.newBlockExpiresAt) {
        writes.block = {
          subjectType: "ip",
          subject: ip,
          reason: `more than ${config.rateLimitIpPerHour} sponsorship requests within an hour`,
          expiresAt: ipVerdict.newBlockExpiresAt,
        };
      }
      return refuse({ refusal: "rate_limited", message: "Too many requests from this address; retry later", retryAfterSeconds: ipVerdict.retryAfterSeconds });
    }

    // Wallet registered.
    writes.hits.push({ scope: "sponsorship_ip", key: ip });
    if (s.walletId === null) {
      return refuse({ refusal: "wallet_not_registered", message: `Register ${address} with POST /wallets/register first` });
    }

    // Replay: the same wallet from the same IP within the window answers the existing request, counting nothing.
    if (s.replayRequest !== null) {
      return { writes: { now: at, hits: [] }, result: { outcome: "replayed", request: s.replayRequest } };
    }

    // Wallet block / limit. An administrator's block is final (422); an automatic one passes (429).
    if (s.walletAdminBlocked) {
      writes.hits.push({ scope: "sponsorship_wallet", key: address });
      return refuse({ refusal: "wallet_blocked", message: "This wallet is blocked and cannot be sponsored" });
    }
    const walletVerdict = judgeLimit(
      { blockedForever: false, blockedUntilMs: s.walletBlockedUntilMs, limitReachedAtMs: s.walletLimitReachedAtMs },
      at,
      config.autoBlockMinutes,
    );
    if (walletVerdict.limited) {
      // A 429 counts nothing.
      writes.hits = [];
      if (walletVerdict.newBlockExpiresAt) {
        writes.block = {
          subjectType: "wallet",
          subject: address,
          reason: `more than ${config.rateLimitWalletPerHour} sponsorship requests within an hour`,
          expiresAt: walletVerdict.newBlockExpiresAt,
        };
      }
      return refuse({ refusal: "rate_limited", message: "Too many requests for this wallet; retry later", retryAfterSeconds: walletVerdict.retryAfterSeconds });
    }
    writes.hits.push({ scope: "sponsorship_wallet", key: address });

    // One open request per wallet.
    if (s.hasOpenRequest) {
      return refuse({ refusal: "request_open", message: "A request for this wallet is still pending, approved or relayed" });
    }

    // Already sponsored: a completed request, or the registry says so.
    if (s.hasCompletedRequest || (await onChain) === "sponsored") {
      return refuse({ refusal: "already_sponsored", message: "This wallet has already been sponsored" });
    }

    const request: RequestView = {
      id: randomUUID(),
      walletId: s.walletId,
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
    };
    writes.request = { id: request.id, walletId: s.walletId, walletAddress: address, ipAddress: ip, userAgent };
    return { writes, result: { outcome: "created", request } };
  };

  let outcome: Outcome;
  try {
    outcome = await attemptCreation(
      db,
      {
        ip,
        address,
        now: at,
        ipLimit: config.rateLimitIpPerHour,
        walletLimit: config.rateLimitWalletPerHour,
        windowStart: rateWindowStart(at),
        replayStart: new Date(at.getTime() - config.replayWindowMs),
        lockKeys: [sponsorshipIpLockKey(ip), walletLockKey(address)],
      },
      decide,
    );
  } catch (error) {
    // The partial unique index caught a second open request the lock did not (another writer): still a 409.
    if (isUniqueViolation(error)) {
      throw new SponsorshipError("request_open", "A request for this wallet is still pending, approved or relayed");
    }
    throw error;
  }
  if ("refusal" in outcome) throw new SponsorshipError(outcome.refusal, outcome.message, outcome.retryAfterSeconds);
  return outcome;
}
