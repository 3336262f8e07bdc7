import type { IncomingMessage, ServerResponse } from "node:http";
import { Counter, Histogram, type Registry } from "prom-client";

/** HTTP requests by route template, method and status, with latency histograms (web server). */

export type HttpObservation = {
  /** A route template such as `/sponsorship/:id` (see `routeLabel`), never a raw path. */
  route: string;
  method: string;
  status: number;
  seconds: number;
};

export type HttpMetrics = {
  observe(observation: HttpObservation): void;
  /** One problem answer (RFC 9457) by its `code`: what a status alone does not say (a pause's 503 or an outage's). */
  problem(code: string): void;
};

/** Latency buckets from 1 ms to 10 s: the API answers in milliseconds, the pages in tens of them. */
export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export function createHttpMetrics(registry: Registry): HttpMetrics {
  const labelNames = ["route", "method", "status"] as const;
  const requests = new Counter({
    name: "http_requests_total",
    help: "HTTP requests answered, by route template, method and status code",
    labelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "http_request_duration_seconds",
    help: "Time from receiving an HTTP request to the end of its response, by route template, method and status code",
    labelNames,
    buckets: HTTP_DURATION_BUCKETS,
    registers: [registry],
  });
  const problems = new Counter({
    name: "http_problems_total",
    help: "Problem answers (RFC 9457) by their code, e.g. sponsorships_paused, rate_limited, unavailable (docs/api.md)",
    labelNames: ["code"] as const,
    registers: [registry],
  });
  return {
    problem(code) {
      problems.inc({ code });
    },
    observe({ route, method, status, seconds }) {
      const labels = { route, method: METHODS.has(method) ? method : "OTHER", status: String(status) };
      requests.inc(labels);
      duration.observe(labels, Math.max(0, seconds));
    },
  };
}

const UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

/**
 * Route templates of the interface (interface-spec section 4) and the pages. Raw paths carry ids, addresses and
 * hashes: used as labels they would create a series per wallet. Anything unknown is `other`.
 */
const ROUTES: [RegExp, string][] = [
  [/^\/health$/, "/health"],
  [/^\/wallets\/register$/, "/wallets/register"],
  [/^\/wallets\/[^/]+\/history$/, "/wallets/:address/history"],
  [/^\/wallets\/[^/]+$/, "/wallets/:address"],
  [/^\/sponsorship\/request$/, "/sponsorship/request"],
  [/^\/sponsorship\/tx\/[^/]+$/, "/sponsorship/tx/:hash"],
  [new RegExp(`^/sponsorship/(?:${UUID}|[^/]+)$`), "/sponsorship/:id"],
  [/^\/relay\/[^/]+$/, "/relay/:id"],
  [/^\/faucet$/, "/faucet"],
  [/^\/openapi\.json$/, "/openapi.json"],
  [/^\/metrics$/, "/metrics"],
  [/^\/request(?:\/.*)?$/, "/request"],
  [/^\/dashboard(?:\/.*)?$/, "/dashboard"],
  [/^\/admin(?:\/.*)?$/, "/admin"],
  [/^\/_next\//, "/_next"],
  [/^\/$/, "/"],
];

/** The route template for a request path (query string ignored, trailing slash tolerated). */
export function routeLabel(pathOrUrl: string): string {
  let pathname = pathOrUrl;
  const q = pathname.search(/[?#]/);
  if (q >= 0) pathname = pathname.slice(0, q);
  if (pathname.length > 1 && pathname.endsWith("/")) pathname = pathname.slice(0, -1);
  for (const [pattern, label] of ROUTES) if (pattern.test(pathname)) return label;
  return "other";
}

/**
 * Observes one Node HTTP exchange when its response finishes (or the client goes away): call first thing in
 * the server's request handler.
 */
export function instrumentHttpExchange(metrics: HttpMetrics, req: IncomingMessage, res: ServerResponse): void {
  const started = process.hrtime.bigint();
  // As the client sent it: server.ts hands Next a method it cannot dispatch as OPTIONS (lib/http/methods.ts).
  const method = req.method ?? "GET";
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    metrics.observe({
      route: routeLabel(req.url ?? "/"),
      method,
      // A client that hung up before the response ended: 499, as nginx counts it.
      status: res.writableFinished ? res.statusCode : 499,
      seconds: Number(process.hrtime.bigint() - started) / 1e9,
    });
  };
  res.once("finish", finish);
  res.once("close", finish);
}
