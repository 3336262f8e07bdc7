/**
 * Rate limits and automatic blocks (decisions.md, "Rate limits and blocks"): N requests per rolling hour per IP
 * and per wallet; the request over the limit is 429 and blocks the IP or wallet for AUTO_BLOCK_MINUTES.
 *
 * Choices where the decisions are silent (docs/api.md):
 * - A refused 429 is not counted: a client that waits as told by Retry-After is served when it comes back.
 * - Retry-After is the time until a retry can succeed: the end of the block, or later if the rolling hour is
 *   still full then (the limit keeps holding after a block ends).
 * - A request that meets a full window with no active block starts a new block.
 *
 * Where they run: for sponsorship requests inside the database, in the PL/pgSQL function
 * `create_sponsorship_request` (db/functions/create_sponsorship_request.sql, blocks "IP block / limit" and
 * "Wallet block / limit"), under the IP and wallet locks; for registrations in `register_wallet`
 * (db/functions/register_wallet.sql, "Registration limit"), under the identity's lock. This file
 * holds only the window arithmetic both callers share (rules.ts maps every rule).
 */

export const RATE_LIMIT_WINDOW_MS = 60 * 60 * 1000;

export function rateWindowStart(now: Date): Date {
  return new Date(now.getTime() - RATE_LIMIT_WINDOW_MS);
}

/** A wait of `ms` as a Retry-After: whole seconds, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Whole seconds from `now` to `untilMs`, at least 1. */
export function secondsUntil(now: Date, untilMs: number): number {
  return retryAfterSeconds(untilMs - now.getTime());
}
