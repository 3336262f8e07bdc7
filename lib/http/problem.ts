/**
 * RFC 9457 problem details (decisions.md, "Errors"). The one renderer: every error the API answers leaves through
 * `renderProblem` (as a Response by `problemResponse` in route handlers, the admin routes included; written to Node's
 * response by server.ts for what it answers before Next), so status, `code`, `title`, `type` and `requestId` are
 * uniform and nothing internal leaks. It also counts each answer by its code (`http_problems_total`).
 */

import { countProblem } from "@/lib/metrics/state";

export type FieldError = { path: string; message: string };

/** Every `code` the API can answer, with its status and title. */
export const PROBLEMS = {
  invalid_json: { status: 400, title: "Body is not a JSON object" },
  invalid_address: { status: 400, title: "Invalid wallet address" },
  invalid_id: { status: 400, title: "Invalid id" },
  invalid_hash: { status: 400, title: "Invalid transaction hash" },
  invalid_path: { status: 400, title: "Malformed URL path" },
  bad_request: { status: 400, title: "Malformed HTTP request" },
  origin_not_allowed: { status: 403, title: "Origin not allowed" },
  ip_blocked: { status: 403, title: "Address blocked" },
  not_found: { status: 404, title: "Not found" },
  wallet_not_found: { status: 404, title: "Wallet not found" },
  wallet_not_registered: { status: 404, title: "Wallet not registered" },
  request_not_found: { status: 404, title: "Sponsorship request not found" },
  relay_not_found: { status: 404, title: "Relay transaction not found" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  request_open: { status: 409, title: "A request for this wallet is still open" },
  request_timeout: { status: 408, title: "Request not received in time" },
  expectation_failed: { status: 417, title: "Expectation not supported" },
  payload_too_large: { status: 413, title: "Body too large" },
  headers_too_large: { status: 431, title: "Request headers too large" },
  unsupported_media_type: { status: 415, title: "Unsupported media type" },
  invalid_value: { status: 422, title: "Invalid value" },
  unexpected_field: { status: 422, title: "Unexpected field" },
  invalid_cursor: { status: 422, title: "Invalid cursor" },
  invalid_limit: { status: 422, title: "Invalid limit" },
  wallet_blocked: { status: 422, title: "Wallet blocked" },
  already_sponsored: { status: 422, title: "Wallet already sponsored" },
  rate_limited: { status: 429, title: "Too many requests" },
  budget_exhausted: { status: 429, title: "Sponsorship budget exhausted" },
  internal_error: { status: 500, title: "Internal server error" },
  sponsorships_paused: { status: 503, title: "Sponsorships paused" },
  unavailable: { status: 503, title: "Service temporarily unavailable" },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** Codes only the administrator's routes under /admin answer (not part of the public OpenAPI document). */
export const ADMIN_PROBLEMS = {
  unauthorized: { status: 401, title: "Sign-in required" },
  invalid_token: { status: 401, title: "Wrong administrator token" },
  ip_block_not_found: { status: 404, title: "IP block not found" },
  admin_not_configured: { status: 503, title: "Administration is not configured" },
} as const satisfies Record<string, { status: number; title: string }>;

export type AdminProblemCode = keyof typeof ADMIN_PROBLEMS;
/** Every code the service answers anywhere. */
export type AnyProblemCode = ProblemCode | AdminProblemCode;

export function isProblemCode(code: unknown): code is ProblemCode {
  return typeof code === "string" && Object.hasOwn(PROBLEMS, code);
}

function problemInfo(code: AnyProblemCode): { status: number; title: string } {
  return isProblemCode(code) ? PROBLEMS[code] : ADMIN_PROBLEMS[code];
}

/** Headers a code always carries: a 401 names how to authenticate (RFC 9110 §11.6.1). */
const CODE_HEADERS: Partial<Record<AnyProblemCode, Record<string, string>>> = {
  unauthorized: { "www-authenticate": 'Cookie realm="dashboard"' },
};

/** The `type` URI of a code: a stable identifier (documented in docs/api.md), not a page to fetch. */
export const problemType = (code: AnyProblemCode) => `urn:problem-type:gas-sponsorship:${code}`;

export type ProblemBody = {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: AnyProblemCode;
  requestId: string;
  errors?: FieldError[];
};

export type ProblemOptions = { errors?: FieldError[]; headers?: Record<string, string> };

/** A refusal raised anywhere below a route handler; the route wrapper renders it. */
export class HttpProblem extends Error {
  override name = "HttpProblem";
  constructor(
    readonly code: AnyProblemCode,
    readonly detail: string,
    readonly options: ProblemOptions = {},
  ) {
    super(detail);
  }

  get status(): number {
    return problemInfo(this.code).status;
  }
}

export function problemBody(code: AnyProblemCode, detail: string, requestId: string, errors?: FieldError[]): ProblemBody {
  const { status, title } = problemInfo(code);
  const body: ProblemBody = { type: problemType(code), title, status, detail, code, requestId };
  if (errors && errors.length > 0) body.errors = errors;
  return body;
}

/** A problem as status, headers (lowercase names) and serialised body: what every renderer sends. */
export function renderProblem(
  code: AnyProblemCode,
  detail: string,
  requestId: string,
  options: ProblemOptions = {},
): { status: number; headers: Record<string, string>; body: string } {
  const body = problemBody(code, detail, requestId, options.errors);
  countProblem(code);
  const headers: Record<string, string> = { ...CODE_HEADERS[code] };
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  headers["content-type"] = "application/problem+json";
  headers["cache-control"] = "no-store";
  return { status: body.status, headers, body: JSON.stringify(body) };
}

/** `renderProblem` as a Response (route handlers). */
export function problemResponse(code: AnyProblemCode, detail: string, requestId: string, options: ProblemOptions = {}): Response {
  const { status, headers, body } = renderProblem(code, detail, requestId, options);
  return new Response(body, { status, headers });
}
