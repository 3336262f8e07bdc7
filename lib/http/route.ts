import { isDatabaseOutage } from "@/db/unavailable";
import { log } from "@/lib/log";
import { isSponsorshipError } from "@/lib/sponsorship/errors";
import { appConfig } from "./app-context";
import { CLIENT_PROTO_HEADER, clientIpOf, requestHost } from "./client-ip";
import { checkCors, preflightHeaders } from "./cors";
import { isOperatorPath, routedPath, UNROUTED_METHOD_HEADER } from "./methods";
import { HttpProblem, problemResponse } from "./problem";
import { REQUEST_ID_HEADER, requestIdFor } from "./request-id";

/**
 * The route wrapper: everything every endpoint does the same way, so handlers stay thin (parse, call one domain
 * function, map the result). It settles the request id, applies CORS (403 for a foreign origin, preflight 204),
 * answers 405 with `Allow` for methods the route does not serve, turns thrown refusals into problem details, and
 * logs unexpected errors in full while answering a generic 500.
 */

export type RouteParams = Record<string, string | string[] | undefined>;

export type HandlerInput = {
  request: Request;
  /** The dynamic segments of the path, as Next decoded them. */
  params: RouteParams;
  url: URL;
  requestId: string;
  /** The client address server.ts resolved (see client-ip.ts). */
  clientIp: string;
};

export type Handler = (input: HandlerInput) => Promise<Response> | Response;

type HandledMethod = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
type Method = (typeof ALL_METHODS)[number];

export type RouteContext = { params: Promise<RouteParams> };
export type NextRouteHandler = (request: Request, context: RouteContext) => Promise<Response>;

function allowedMethods(handlers: Partial<Record<HandledMethod, Handler>>): string[] {
  const methods: string[] = [];
  if (handlers.GET) methods.push("GET", "HEAD");
  for (const method of ["POST", "PUT", "PATCH", "DELETE"] as const) if (handlers[method]) methods.push(method);
  methods.push("OPTIONS");
  return methods;
}

function withHeaders(response: Response, headers: Record<string, string>): Response {
  for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
  return response;
}

/** Seconds a client is told to wait while the database cannot be reached (or cancels statements for time). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/**
 * A database outage (or a statement cancelled by statement_timeout / lock_timeout) is not a bug of the request:
 * `503 unavailable` with `Retry-After`, so clients retry instead of giving up (decisions.md, "Wire format"). The log
 * keeps the full error; the answer names nothing internal. Undefined for any other error.
 */
export function unavailableResponse(error: unknown, requestId: string, request: { method: string; url: string }): Response | undefined {
  if (!isDatabaseOutage(error)) return undefined;
  log.warn("request refused: the database is unavailable", { requestId, method: request.method, path: new URL(request.url, "http://x").pathname, error });
  return problemResponse("unavailable", "The service cannot reach its database right now; retry shortly", requestId, {
    headers: { "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS) },
  });
}

function errorResponse(error: unknown, requestId: string, request: Request): Response {
  if (error instanceof HttpProblem) {
    return problemResponse(error.code, error.detail, requestId, error.options);
  }
  if (isSponsorshipError(error)) {
    const headers: Record<string, string> = {};
    if (error.retryAfterSeconds !== undefined) headers["retry-after"] = String(Math.max(1, error.retryAfterSeconds));
    return problemResponse(error.code, error.message, requestId, { headers });
  }
  const unavailable = unavailableResponse(error, requestId, request);
  if (unavailable) return unavailable;
  log.error("request failed", { requestId, method: request.method, path: new URL(request.url).pathname, error });
  return problemResponse("internal_error", "The request could not be completed; it has been logged", requestId);
}

/**
 * The seven method exports of a route.ts: `export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } =
 * defineRoute({ GET: handler })`. Exporting every method keeps 405, OPTIONS and HEAD in our hands.
 */
export function defineRoute(
  handlers: Partial<Record<HandledMethod, Handler>>,
  options: {
    /** Answers a method Next cannot dispatch (TRACE, PROPFIND, ...; lib/http/methods.ts) instead of 405. */
    unrouted?: Handler;
  } = {},
): Record<Method, NextRouteHandler> {
  const allow = allowedMethods(handlers);
  const allowHeader = allow.join(", ");

  const serve = async (method: Method, request: Request, context: RouteContext): Promise<Response> => {
    const requestId = requestIdFor(request.headers.get(REQUEST_ID_HEADER));
    let response: Response;
    let corsHeaders: Record<string, string> = { vary: "Origin" };
    try {
      // CORS_ORIGINS lets public API clients in; the administrator's routes answer the app's own pages alone (a
      // listed origin on the same site would otherwise send the SameSite=Strict session cookie along).
      // routedPath: Next also matches `/%61dmin/resume` to admin/resume.
      const admin = isOperatorPath(routedPath(request.url));
      const cors = checkCors(
        request.headers.get("origin"),
        requestHost((name) => request.headers.get(name)),
        admin ? [] : appConfig().corsOrigins,
        request.headers.get(CLIENT_PROTO_HEADER),
      );
      corsHeaders = cors.headers;
      const unrouted = method === "OPTIONS" ? request.headers.get(UNROUTED_METHOD_HEADER) : null;
      if (cors.refused) {
        response = problemResponse("origin_not_allowed", "This origin may not call the API", requestId);
      } else if (method === "OPTIONS" && !unrouted) {
        // A preflight, or a plain OPTIONS from a server: the methods of the route either way.
        response = new Response(null, {
          status: 204,
          headers: { allow: allowHeader, ...(cors.allowedOrigin ? preflightHeaders(cors.allowedOrigin, allow) : {}) },
        });
      } else {
        // A method Next cannot dispatch (TRACE, PROPFIND, ...) arrives from server.ts as a marked OPTIONS (methods.ts).
        const handler = unrouted ? options.unrouted : method === "HEAD" ? handlers.GET : handlers[method as HandledMethod];
        if (!handler) {
          response = problemResponse("method_not_allowed", `${unrouted ?? method} is not supported here; use ${allowHeader}`, requestId, {
            headers: { allow: allowHeader },
          });
        } else {
          const params = (await context.params) ?? {};
          response = await handler({ request, params, url: new URL(request.url), requestId, clientIp: clientIpOf(request) });
        }
      }
    } catch (error) {
      response = errorResponse(error, requestId, request);
    }
    response = withHeaders(response, { ...corsHeaders, [REQUEST_ID_HEADER]: requestId });
    if (method === "HEAD") return new Response(null, { status: response.status, headers: response.headers });
    return response;
  };

  const entries = ALL_METHODS.map((method) => [method, (request: Request, context: RouteContext) => serve(method, request, context)]);
  return Object.fromEntries(entries) as Record<Method, NextRouteHandler>;
}

/** A JSON success response. */
export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store", ...headers },
  });
}
