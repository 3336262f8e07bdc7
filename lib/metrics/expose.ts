import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import type { Logger } from "@/lib/log";

/**
 * Two ways to expose a registry, neither public (issue 6: "behind the administrator's credential or on a
 * separate loopback port"): a small HTTP server bound to 127.0.0.1 on METRICS_PORT, and `GET /metrics` on the
 * web server's own port, answered only to `Authorization: Bearer <ADMIN_TOKEN>`.
 */

export type MetricsServer = { port: number; close(): Promise<void> };

/** Serves `GET /metrics` (and `/`) on 127.0.0.1:`port` (0 = any free port). Loopback only, by design. */
export async function startMetricsServer(
  registry: Registry,
  port: number,
  options: { host?: "127.0.0.1" | "::1"; logger?: Logger } = {},
): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/metrics" && path !== "/") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("method not allowed\n");
      return;
    }
    void writeMetrics(registry, res, req.method === "HEAD", options.logger);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  options.logger?.info("metrics server listening", { host: options.host ?? "127.0.0.1", port: bound });
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function writeMetrics(registry: Registry, res: ServerResponse, headOnly: boolean, logger?: Logger): Promise<void> {
  try {
    const body = await registry.metrics();
    res.writeHead(200, { "content-type": registry.contentType, "cache-control": "no-store" });
    res.end(headOnly ? undefined : body);
  } catch (error) {
    logger?.error("metrics collection failed", { error });
    res.writeHead(500, { "content-type": "text/plain" }).end("metrics collection failed\n");
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** Constant-time check of `Authorization: Bearer <token>` against the administrator's credential. */
export function isAdminBearer(authorization: string | null | undefined, adminToken: string | undefined): boolean {
  if (!adminToken || !authorization) return false;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match?.[1]) return false;
  return timingSafeEqual(digest(match[1]), digest(adminToken));
}

/** RFC 9457 problem details in the API's shape (lib/http/problem.ts), so GET /metrics is documented like the rest. */
const problem = (status: number, code: string, title: string, requestId: string) =>
  JSON.stringify({ type: `urn:problem-type:gas-sponsorship:${code}`, title, status, detail: title, code, requestId });

/** The id server.ts settled for this request (it sets the header before routing), or a fresh one. */
const requestIdOf = (req: IncomingMessage) => {
  const id = req.headers["x-request-id"];
  return typeof id === "string" && id !== "" ? id : randomUUID();
};

/** The bearer token of an `Authorization` header, or undefined. */
export function bearerToken(authorization: string | null | undefined): string | undefined {
  if (!authorization) return undefined;
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
}

/**
 * How a presented bearer token is judged on the web port: the administrator sign-in's limiter and audit
 * (lib/admin/session.ts `verifyAdministratorToken`), wired by server.ts. It may throw (database unreachable).
 */
export type MetricsAuthorizer = (token: string) => Promise<{ kind: "valid" } | { kind: "invalid_token" } | { kind: "rate_limited"; retryAfterSeconds: number }>;

/** Seconds a scraper is told to wait when the token cannot be checked (the database is unreachable). */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

const METRICS_ALLOW = "GET, HEAD, OPTIONS";

/**
 * For the web server's Node handler (server.ts): answers `/metrics` and returns true, or returns false for any
 * other path so the caller passes the request on to Next.
 */
export async function serveMetricsRequest(
  registry: Registry,
  req: IncomingMessage,
  res: ServerResponse,
  options: { adminToken: string | undefined; logger?: Logger; authorize?: MetricsAuthorizer },
): Promise<boolean> {
  const path = (req.url ?? "/").split("?")[0];
  if (path !== "/metrics") return false;
  // Like every route (decisions.md): OPTIONS 204 with Allow, any other method 405 with Allow.
  if (req.method === "OPTIONS") {
    res.writeHead(204, { allow: METRICS_ALLOW });
    res.end();
    return true;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: METRICS_ALLOW, "content-type": "application/problem+json" });
    res.end(problem(405, "method_not_allowed", "Method not allowed", requestIdOf(req)));
    return true;
  }
  const unauthorized = () => {
    res.writeHead(401, { "content-type": "application/problem+json", "www-authenticate": 'Bearer realm="metrics"' });
    res.end(problem(401, "unauthorized", "The administrator's credential is required", requestIdOf(req)));
    return true;
  };
  const token = bearerToken(req.headers.authorization);
  // No credential at all is not a guess: answered without counting (and without touching the database).
  if (!options.adminToken || token === undefined) return unauthorized();
  if (!options.authorize) {
    if (!isAdminBearer(req.headers.authorization, options.adminToken)) return unauthorized();
  } else {
    let verdict: Awaited<ReturnType<MetricsAuthorizer>>;
    try {
      verdict = await options.authorize(token);
    } catch (error) {
      options.logger?.warn("metrics: the administrator token could not be checked", { error });
      res.writeHead(503, { "content-type": "application/problem+json", "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS) });
      res.end(problem(503, "unavailable", "The credential cannot be checked right now; retry shortly", requestIdOf(req)));
      return true;
    }
    if (verdict.kind === "rate_limited") {
      res.writeHead(429, { "content-type": "application/problem+json", "retry-after": String(verdict.retryAfterSeconds) });
      res.end(problem(429, "rate_limited", "Too many wrong administrator tokens from this address; wait before trying again", requestIdOf(req)));
      return true;
    }
    if (verdict.kind !== "valid") return unauthorized();
  }
  await writeMetrics(registry, res, req.method === "HEAD", options.logger);
  return true;
}

/** The same for a Fetch-API route handler (`app/(api)/metrics/route.ts`), if the route is preferred to server.ts. */
export async function metricsResponse(registry: Registry, request: Request, adminToken: string | undefined): Promise<Response> {
  if (!isAdminBearer(request.headers.get("authorization"), adminToken)) {
    return new Response(problem(401, "unauthorized", "The administrator's credential is required", request.headers.get("x-request-id") ?? randomUUID()), {
      status: 401,
      headers: { "content-type": "application/problem+json", "www-authenticate": 'Bearer realm="metrics"' },
    });
  }
  return new Response(await registry.metrics(), {
    status: 200,
    headers: { "content-type": registry.contentType, "cache-control": "no-store" },
  });
}
