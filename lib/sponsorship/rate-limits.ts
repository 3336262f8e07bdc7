/**
 * Rate limits and automatic blocks (decisions.md, "Rate limits and blocks"): N requests per rolling hour per IP
 * and per wallet; the request over the limit is 429 and blocks the IP or wallet for AUTO_BLOCK_MINUTES.
 *
 * Choices where the decisions are silent (docs/api.md):
 * - A refused 429 is not counted: a client that waits as told by Retry-After is served when it comes back.
 * - Retry-After is the time until a retry can succeed: the end of the block, or later if the rolling hour is
 *   still full then (the limit keeps holding after a block ends).
 * - A request that meets a full window with no active block starts a new block.
 */

export const RATE_LIMIT_WINDOW_MS = 60 * 60 * 1000;

export function rateWindowStart(now: Date): Date {
  return new Date(now.getTime() - RATE_LIMIT_WINDOW_MS);
}

/** Whole seconds from `now` to `untilMs`, at least 1. */
export function secondsUntil(now: Date, untilMs: number): number {
  return Math.max(1, Math.ceil((untilMs - now.getTime()) / 1000));
}

export type LimitState = {
  /** An active block without expiry (an administrator's). */
  blockedForever: boolean;
  /** Latest expiry of the active automatic blocks (epoch ms), or null. */
  blockedUntilMs: number | null;
  /** The limit-th newest hit inside the rolling window (epoch ms), or null while under the limit. */
  limitReachedAtMs: number | null;
};

export type LimitVerdict =
  | { limited: false }
  | { limited: true; retryAfterSeconds: number; newBlockExpiresAt?: Date };

/** Pure: is this IP or wallet limited now, for how long, and does this request start a block? */
export function judgeLimit(state: LimitState, now: Date, autoBlockMinutes: number): LimitVerdict {
  const windowFreeMs = state.limitReachedAtMs === null ? 0 : state.limitReachedAtMs + RATE_LIMIT_WINDOW_MS;
  if (state.blockedForever) return { limited: true, retryAfterSeconds: secondsUntil(now, now.getTime() + RATE_LIMIT_WINDOW_MS) };
  if (state.blockedUntilMs !== null && state.blockedUntilMs > now.getTime()) {
    return { limited: true, retryAfterSeconds: secondsUntil(now, Math.max(state.blockedUntilMs, windowFreeMs)) };
  }
  if (state.limitReachedAtMs !== null) {
    const newBlockExpiresAt = new Date(now.getTime() + autoBlockMinutes * 60_000);
    return { limited: true, retryAfterSeconds: secondsUntil(now, Math.max(newBlockExpiresAt.getTime(), windowFreeMs)), newBlockExpiresAt };
  }
  return { limited: false };
}
