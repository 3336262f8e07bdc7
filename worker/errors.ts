import { isDatabaseUnavailable } from "@/db/unavailable";
import { ChainUnavailableError } from "./chain-answers";

/**
 * Which failures are outages (waited out with backoff, never fatal) and which are not. A database that cannot be
 * reached shows as a connection error from postgres.js or a server refusing connections (SQLSTATE class 08,
 * 57P01-57P03 shutdown/startup, 53 out of resources); a chain as ChainUnavailableError.
 */

/** What waiting cannot fix: the worker refuses to start (no contracts configured, wrong chain, no contract code). */
export class FatalWorkerError extends Error {
  override name = "FatalWorkerError";
}

// One definition of "the database cannot be reached", shared with the web server (db/unavailable.ts).
export { isDatabaseOverloaded, isDatabaseUnavailable } from "@/db/unavailable";

export function isOutage(error: unknown): boolean {
  return error instanceof ChainUnavailableError || isDatabaseUnavailable(error);
}
