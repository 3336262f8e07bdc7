/**
 * RFC 9457 problem details (decisions.md, "Errors"). Every error the API answers leaves through
 * `problemResponse`, so status, `code`, `title` and `requestId` are uniform and nothing internal leaks.
 */

export type FieldError = { path: string; message: string };

/** Every `code` the API can answer, with its status and title. */
export const PROBLEMS = {
  invalid_json: { status: 400, title: "Body is not a JSON object" },
  invalid_address: { status: 400, title: "Invalid wallet address" },
  invalid_id: { status: 400, title: "Invalid id" },
  invalid_hash: { status: 400, title: "Invalid transaction hash" },
  invalid_path: { status: 400, title: "Malformed URL path" },
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
  payload_too_large: { status: 413, title: "Body too large" },
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

export function isProblemCode(code: unknown): code is ProblemCode {
  return typeof code === "string" && Object.hasOwn(PROBLEMS, code);
}

/** The `type` URI of a code: a stable identifier (documented in docs/api.md), not a page to fetch. */
export const problemType = (code: ProblemCode) => `urn:problem-type:gas-sponsorship:${code}`;

export type ProblemBody = {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  requestId: string;
  errors?: FieldError[];
};

/** A refusal raised anywhere below a route handler; the route wrapper renders it. */
export class HttpProblem extends Error {
  override name = "HttpProblem";
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
    readonly options: { errors?: FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(detail);
  }

  get status(): number {
    return PROBLEMS[this.code].status;
  }
}

export function problemBody(code: ProblemCode, detail: string, requestId: string, errors?: FieldError[]): ProblemBody {
  const { status, title } = PROBLEMS[code];
  const body: ProblemBody = { type: problemType(code), title, status, detail, code, requestId };
  if (errors && errors.length > 0) body.errors = errors;
  return body;
}

export function problemResponse(
  code: ProblemCode,
  detail: string,
  requestId: string,
  options: { errors?: FieldError[]; headers?: Record<string, string> } = {},
): Response {
  const body = problemBody(code, detail, requestId, options.errors);
  const headers = new Headers(options.headers);
  headers.set("content-type", "application/problem+json");
  headers.set("cache-control", "no-store");
  return new Response(JSON.stringify(body), { status: body.status, headers });
}
