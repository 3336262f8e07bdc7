import { ChainUnavailableError } from "./chain";

/**
 * Which failures are outages (waited out with backoff, never fatal) and which are not. A database that cannot be
 * reached shows as a connection error from postgres.js or a server refusing connections (SQLSTATE class 08,
 * 57P01-57P03 shutdown/startup, 53 out of resources); a chain as ChainUnavailableError.
 */

/** What waiting cannot fix: the worker refuses to start (no contracts configured, wrong chain, no contract code). */
export class FatalWorkerError extends Error {
  override name = "FatalWorkerError";
}

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code !== "string") continue;
    if (CONNECTION_CODES.has(code)) return true;
    if (/^(08|53)/.test(code) || /^57P0[123]$/.test(code)) return true;
  }
  return false;
}

export function isOutage(error: unknown): boolean {
  return error instanceof ChainUnavailableError || isDatabaseUnavailable(error);
}
