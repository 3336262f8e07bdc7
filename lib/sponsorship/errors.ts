/**
 * The domain's refusals, each with the stable `code` of decisions.md ("Errors"). lib/http maps a code to its HTTP
 * status; the domain never speaks HTTP.
 */
export type SponsorshipErrorCode =
  | "invalid_address"
  | "invalid_value"
  | "invalid_cursor"
  | "wallet_not_found"
  | "wallet_not_registered"
  | "request_not_found"
  | "relay_not_found"
  | "wallet_blocked"
  | "already_sponsored"
  | "request_open"
  | "rate_limited"
  | "budget_exhausted"
  | "sponsorships_paused"
  | "ip_blocked";

export class SponsorshipError extends Error {
  override name = "SponsorshipError";
  constructor(
    readonly code: SponsorshipErrorCode,
    message: string,
    /** For `rate_limited`, `budget_exhausted` and `sponsorships_paused`: whole seconds until a retry can succeed (>= 1). */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export function isSponsorshipError(error: unknown): error is SponsorshipError {
  return error instanceof SponsorshipError;
}
