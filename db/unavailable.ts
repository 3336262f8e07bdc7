/**
 * Which database failures are outages rather than bugs. A database that cannot be reached shows as a connection
 * error from postgres.js or the network (the codes below), or as a server refusing connections: SQLSTATE class
 * 08 (connection exception), 53 (out of resources: too many connections), 57P01-57P03 (shutting down, crashed,
 * starting up). The worker waits these out with backoff; the web server answers `503 unavailable` with
 * `Retry-After` (decisions.md, "Wire format"), never a 500.
 */

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "CONNECT_TIMEOUT",
  "ANSWER_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
]);

/** The error and what it wraps: Drizzle's `cause`, Node's AggregateError (one error per address tried). */
function* errorChain(error: unknown, depth = 0): Generator<object> {
  if (!error || typeof error !== "object" || depth > 8) return;
  yield error;
  const errors = (error as { errors?: unknown }).errors;
  if (Array.isArray(errors)) for (const inner of errors) yield* errorChain(inner, depth + 1);
  yield* errorChain((error as { cause?: unknown }).cause, depth + 1);
}

function codesOf(error: unknown): string[] {
  const codes: string[] = [];
  for (const e of errorChain(error)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
  }
  return codes;
}

/** PostgreSQL cannot be reached, or refuses connections for now. */
export function isDatabaseUnavailable(error: unknown): boolean {
  return codesOf(error).some((code) => CONNECTION_CODES.has(code) || /^(08|53)/.test(code) || /^57P0[123]$/.test(code));
}

/**
 * A statement the server cancelled for time: `statement_timeout` (57014) or `lock_timeout` (55P03), which the web
 * server's pool sets (db/client.ts). The database is there but overloaded or contended: retrying later helps.
 */
export function isDatabaseOverloaded(error: unknown): boolean {
  return codesOf(error).some((code) => code === "57014" || code === "55P03");
}

/**
 * The web server's one definition of a database outage: unreachable (isDatabaseUnavailable) or cancelling
 * statements for time (isDatabaseOverloaded). The API answers it with `503 unavailable` and Retry-After
 * (lib/http/route.ts `unavailableResponse`); the dashboard's pages with a notice in their frame
 * (app/(web)/dashboard/_components/database-outage.tsx). Any other error is a bug and surfaces as one.
 */
export function isDatabaseOutage(error: unknown): boolean {
  return isDatabaseUnavailable(error) || isDatabaseOverloaded(error);
}

/** A short, stable code for a database failure, for `/health` (never the error's text, which names hosts and users). */
export type DatabaseFailureCode = "unreachable" | "timeout" | "auth_failed" | "starting_up" | "too_many_connections" | "error";

export function databaseFailureCode(error: unknown): DatabaseFailureCode {
  const codes = codesOf(error);
  if (codes.some((c) => c === "28P01" || c === "28000")) return "auth_failed";
  if (codes.some((c) => c === "CONNECT_TIMEOUT" || c === "ANSWER_TIMEOUT" || c === "ETIMEDOUT" || c === "57014" || c === "TIMEOUT")) return "timeout";
  if (codes.some((c) => c === "57P03")) return "starting_up";
  if (codes.some((c) => c === "53300")) return "too_many_connections";
  if (isDatabaseUnavailable(error) || codes.includes("3D000")) return "unreachable";
  return "error";
}
