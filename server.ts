import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import next from "next";
import { pruneBudgetCounts } from "@/db/queries/controls";
import { removeExpiredPersonalData } from "@/db/queries/ip-retention";
import { pruneRateLimitHits } from "@/db/queries/rate-limits";
import { appDb, closeAppDb } from "@/lib/http/app-context";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { verifyAdministratorToken } from "@/lib/admin/session";
import { CLIENT_IP_HEADER, CLIENT_PROTO_HEADER, requestHost, resolveClientIp, resolveClientProto, resolveForwardedHost } from "@/lib/http/client-ip";
import { applySecurityHeaders, STATIC_HEADERS } from "@/lib/http/security-headers";
import { checkCors, isDowngradedOwnOrigin } from "@/lib/http/cors";
import { EntrypointTable } from "@/lib/http/entrypoints";
import { withTimeout } from "@/lib/with-timeout";
import { decideMethod, isOperatorPath, routedPath, UNROUTED_METHOD_HEADER } from "@/lib/http/methods";
import { decideTarget, SERVER_METHODS } from "@/lib/http/request-target";
import { renderProblem, type ProblemCode } from "@/lib/http/problem";
import { REQUEST_ID_HEADER, requestIdFor } from "@/lib/http/request-id";
import { storedUserAgent } from "@/lib/http/user-agent";
import { ConfigError, getConfig, type Config } from "@/lib/config";
import { log } from "@/lib/log";
import { getWebMetrics, instrumentHttpRequest, serveWebMetrics, startProcessMetricsServer } from "@/lib/metrics";
import { keepNextFromEnvFiles } from "@/lib/env-files";
import { stopWhenSupervisorGone } from "@/lib/supervised";
import { RATE_LIMIT_WINDOW_MS } from "@/lib/sponsorship/rate-limits";
import { WorkerWatch } from "@/lib/webhooks/worker-watch";

/**
 * The web process (`tsx server.ts`, spawned by `npm start`): Next.js in production mode behind a node:http server.
 *
 * Why a custom server: route handlers cannot see the socket, and Next's own server fills `x-forwarded-for` from the
 * socket only when the header is absent, so a handler could not tell a forged header from a real one. Here every
 * request gets its client address from the TCP peer (X-Forwarded-For only with TRUST_PROXY=N hops), handed to the
 * handlers in `x-client-ip` after any incoming header of that name is deleted, and its X-Request-Id (echoed when
 * valid, else generated) before Next sees it, so every response, Next's own included, carries it.
 *
 * Slow clients cannot hold it (issue 11, item 5): complete headers within 10 s and the whole request within 30 s,
 * else `408` and the connection is closed; at most MAX_CONNECTIONS connections at once; an idle keep-alive
 * connection is closed after 5 s (65 s behind a proxy). Every response carries the security headers (lib/http/security-headers.ts).
 *
 * SIGTERM/SIGINT: stop accepting, let in-flight requests finish (keep-alive connections are closed as they go
 * idle), close the database pool, exit 0. A bad configuration exits 1 with one line naming the variable.
 */

const ROOT = path.dirname(fileURLToPath(import.meta.url));
/** In-flight requests get this long to finish after a stop signal. */
const DRAIN_TIMEOUT_MS = 15_000;
const PRUNE_INTERVAL_MS = 10 * 60_000;
/** A client must send its complete headers within this (decisions.md, "Wire format"). */
const HEADERS_TIMEOUT_MS = 10_000;
/** ... and its whole request (headers and body) within this. */
const REQUEST_TIMEOUT_MS = 30_000;
/**
 * An idle keep-alive connection is closed after this. Behind a proxy (TRUST_PROXY > 0) the connections are the
 * proxy's, few and reused: longer than the idle timeout of the usual ones (AWS ALB 60 s, nginx's upstream keepalive
 * 60 s), so the proxy always closes first and never sends a request on a connection this server is closing (a 502).
 */
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
const KEEP_ALIVE_TIMEOUT_BEHIND_PROXY_MS = 65_000;
/**
 * How often Node checks the two timeouts above (its default, 30 s, would let a slow client stay up to 40 s).
 */
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;
/**
 * Connections served at once; further ones are closed as they arrive. Far above what a proxy or the benchmarks
 * open (hundreds), far below the process's file descriptor limit.
 */
const MAX_CONNECTIONS = 4_096;

/**
 * Node calls this for a connection it gives up on before a response was started: a request not received in time
 * (408), headers too large (431), a malformed request (400). The answer is problem+json with an X-Request-Id like
 * every other error, and the connection is closed. A connection reset needs no answer. On a kept-alive connection
 * the earlier responses do not count: its next request is answered like a first one. A pipelined request that
 * arrives malformed while the one before it is still being answered waits for that answer to go out whole: the
 * client learns how its earlier request ended (a registration that succeeded is not reported as a 400), then why
 * this one was refused.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  // The request being answered is whole: the error is a later one's.
  if (inFlight && !inFlight.writableFinished && inFlight.req.complete) {
    inFlight.once("finish", () => writeClientError(error, socket));
    inFlight.once("close", () => {
      if (!inFlight.writableFinished) socket.destroy();
    });
    return;
  }
  // The request being answered is this one (its body did not arrive in time, or is malformed): answered now, unless
  // its answer has begun (this one would corrupt it).
  if (inFlight?.headersSent) socket.destroy();
  else writeClientError(error, socket);
}

function writeClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (socket.writable) {
    const requestId = requestIdFor(undefined);
    const [code, reason, detail] =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? ([
            "request_timeout",
            "Request Timeout",
            `Send the complete headers within ${HEADERS_TIMEOUT_MS / 1000} s and the whole request within ${REQUEST_TIMEOUT_MS / 1000} s`,
          ] as const)
        : error.code === "HPE_HEADER_OVERFLOW"
          ? (["headers_too_large", "Request Header Fields Too Large", "The request line and headers must fit in 16 KiB (a long URL counts)"] as const)
          : (["bad_request", "Bad Request", "The request is not well-formed HTTP/1.1"] as const);
    const { status, headers, body } = renderProblem(code, detail, requestId);
    const lines = Object.entries({
      ...Object.fromEntries(STATIC_HEADERS),
      ...headers,
      [REQUEST_ID_HEADER]: requestId,
      "content-length": String(Buffer.byteLength(body)),
      connection: "close",
    });
    socket.write(`HTTP/1.1 ${status} ${reason}\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join("")}\r\n${body}`);
  }
  socket.destroy();
}

/**
 * Next's own pages and endpoints that a client may request by name but nothing of this service uses: its built-in
 * error pages (HTML, one with a year's `s-maxage`, `/_global-error` a 500) and its image optimiser (`next/image` is
 * not used; the optimiser fetches and resizes on request, work nobody should be able to ask for). They answer the
 * catch-all's 404, as any other path no endpoint serves.
 */
function isNextOwnPath(pathname: string): boolean {
  const p = pathname.toLowerCase();
  return (
    p === "/_not-found" || p === "/_global-error" || p === "/_error" || p === "/404" || p === "/500" || p === "/_next/image" || p.startsWith("/_next/image/")
  );
}

function loadConfig(): Config {
  try {
    return getConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      process.exit(1);
    }
    throw error;
  }
}

/** lib/http/problem.ts's renderer, written to Node's response (for what server.ts answers before Next). */
function sendProblem(res: ServerResponse, code: ProblemCode, detail: string, requestId: string): void {
  const { status, headers, body } = renderProblem(code, detail, requestId);
  res.statusCode = status;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.end(body);
}

/** Next answers a path with a malformed percent-escape (`/wallets/%ZZ`) with a bare 500; it is the client's error. */
function pathDecodes(url: string | undefined): boolean {
  const pathname = (url ?? "/").split("?")[0]!;
  try {
    decodeURIComponent(pathname);
    return true;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const config = loadConfig();
  if (!config.databaseUrl) {
    console.error("Invalid configuration: DATABASE_URL is required by the web server (npm start provides it)");
    process.exit(1);
  }
  // Next reads NODE_ENV; the web server always runs the production build.
  if (process.env.NODE_ENV !== "production") Object.assign(process.env, { NODE_ENV: "production" });

  let stopping = false;
  const server = createServer({
    // A request without Host reaches the listener, which answers it as problem+json (lib/http/request-target.ts).
    requireHostHeader: false,
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
  });
  server.keepAliveTimeout = config.trustProxy > 0 ? KEEP_ALIVE_TIMEOUT_BEHIND_PROXY_MS : KEEP_ALIVE_TIMEOUT_MS;
  server.maxConnections = MAX_CONNECTIONS;
  server.on("clientError", answerClientError);
  // An `Expect` other than 100-continue (which Node answers itself): 417, as problem+json.
  server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
    const incoming = req.headers[REQUEST_ID_HEADER];
    const requestId = requestIdFor(typeof incoming === "string" ? incoming : undefined);
    for (const [name, value] of STATIC_HEADERS) res.setHeader(name, value);
    res.setHeader("X-Request-Id", requestId);
    res.setHeader("Connection", "close");
    sendProblem(res, "expectation_failed", "Only Expect: 100-continue is supported", requestId);
  });
  // Next attaches its WebSocket upgrade handler (the development server's, and rewrites to other hosts: neither is
  // used here) to the server it is given, at its first request, and that handler closes every other upgrade without
  // a word: any request with `Connection: Upgrade` (an h2c upgrade offer, which some HTTP clients send by default)
  // would get an empty reply. Given a stand-in, Node sees no upgrade listener, ignores the offer and serves the
  // request as HTTP/1.1 (RFC 9110 §7.8 lets a server ignore it).
  // Settings come from the environment only: Next is kept from loading ROOT's .env files (lib/env-files.ts).
  keepNextFromEnvFiles();
  const app = next({ dev: false, dir: ROOT, port: config.port, httpServer: new EventEmitter() as Server, quiet: true });
  await app.prepare();
  const handle = app.getRequestHandler();
  // The public API's route handlers, invoked through their built entrypoints; everything else through Next's handler.
  const entrypoints = EntrypointTable.read(path.join(ROOT, ".next"), ROOT);
  if (entrypoints.size === 0) log.warn("the build has no API entrypoint table: every request goes through Next's router", { distDir: ".next" });

  const serve = (req: IncomingMessage, res: ServerResponse, requestId: string) => {
    instrumentHttpRequest(req, res);
    // A client may not choose its own address (whatever it sent in x-client-ip is replaced) nor pass a method off as
    // one server.ts handed over (lib/http/methods.ts).
    delete req.headers[CLIENT_IP_HEADER];
    delete req.headers[UNROUTED_METHOD_HEADER];
    req.headers[CLIENT_IP_HEADER] = resolveClientIp({
      peerAddress: req.socket.remoteAddress,
      forwardedFor: req.headers["x-forwarded-for"],
      trustProxy: config.trustProxy,
    });
    // The scheme, like the address, only from the socket or a trusted proxy hop: it decides the cookie's Secure flag.
    const proto = resolveClientProto({
      encrypted: (req.socket as TLSSocket).encrypted === true,
      forwardedProto: req.headers["x-forwarded-proto"],
      trustProxy: config.trustProxy,
    });
    req.headers[CLIENT_PROTO_HEADER] = proto;
    req.headers["x-forwarded-proto"] = proto;
    // The host, likewise: a trusted proxy's X-Forwarded-Host, or none (lib/http/client-ip.ts resolveForwardedHost).
    const forwardedHost = resolveForwardedHost({ forwardedHost: req.headers["x-forwarded-host"], trustProxy: config.trustProxy });
    delete req.headers["x-forwarded-host"];
    if (forwardedHost !== undefined) req.headers["x-forwarded-host"] = forwardedHost;
    // Next takes the nonce for its scripts from the request's policy; the client's own header is replaced.
    applySecurityHeaders(req, res, proto === "https");
    req.headers[REQUEST_ID_HEADER] = requestId;
    res.setHeader("X-Request-Id", requestId);
    if (stopping) res.setHeader("Connection", "close");
    // Answered here, before Next, with the route handlers' CORS decision (lib/http/cors.ts checkCors).
    const header = (name: string) => (typeof req.headers[name] === "string" ? (req.headers[name] as string) : null);
    const refuse = (code: ProblemCode, detail: string) => {
      const cors = checkCors(header("origin"), requestHost(header), config.corsOrigins, proto);
      for (const [name, value] of Object.entries(cors.headers)) res.setHeader(name, value);
      if (cors.refused) sendProblem(res, "origin_not_allowed", "This origin may not call the API", requestId);
      else sendProblem(res, code, detail, requestId);
    };
    // The request line's target and Host as HTTP/1.1 defines them (lib/http/request-target.ts).
    const target = decideTarget(req);
    if (target.kind === "invalid") {
      if (target.code === "bad_request") res.setHeader("Connection", "close");
      refuse(target.code, target.detail);
      return;
    }
    if (target.kind === "server-options") {
      res.writeHead(204, { allow: SERVER_METHODS }).end();
      return;
    }
    req.url = target.url;
    if (target.host !== undefined) req.headers.host = target.host;
    if (!pathDecodes(req.url)) {
      refuse("invalid_path", "The path contains a malformed percent-escape");
      return;
    }
    const routed = routedPath(req.url);
    if (isNextOwnPath(routed)) {
      refuse("not_found", "No endpoint at this path; see /openapi.json");
      return;
    }
    // Served over https, the same host over http is not this app's page (lib/http/cors.ts isDowngradedOwnOrigin): refused
    // here for every path, the dashboard's server actions too, which Next's own check compares by host alone.
    // CORS_ORIGINS may list it for the public API, never for the administrator's routes and pages (as route.ts).
    if (isDowngradedOwnOrigin(header("origin"), requestHost(header), proto, isOperatorPath(routed) ? [] : config.corsOrigins)) {
      // Not through refuse(): its CORS decision takes CORS_ORIGINS for every path, and would allow a listed origin here.
      res.setHeader("vary", "Origin");
      sendProblem(res, "origin_not_allowed", "This origin may not call the API", requestId);
      return;
    }
    // Prometheus text format, only for the administrator's bearer credential (or on the loopback METRICS_PORT).
    if (req.url === "/metrics" || req.url?.startsWith("/metrics?")) {
      // A foreign Origin is refused as on every API route (decisions.md "CORS"), before any credential is looked at.
      if (checkCors(header("origin"), requestHost(header), config.corsOrigins, proto).refused) {
        sendProblem(res, "origin_not_allowed", "This origin may not call the API", requestId);
        return;
      }
      // Bearer guesses share the administrator sign-in's limiter and audit (issue 11, item 4).
      const clientIp = req.headers[CLIENT_IP_HEADER] as string;
      const userAgent = storedUserAgent(req.headers["user-agent"]);
      void serveWebMetrics(req, res, log, (token) =>
        verifyAdministratorToken(appDb(), {
          token,
          adminToken: config.adminToken ?? "",
          ipAddress: clientIp,
          ipv6PrefixLength: config.ipv6PrefixLength,
          userAgent,
          channel: "metrics",
        }),
      );
      return;
    }
    // 405 with Allow where Next would render a page or answer an empty 400 (lib/http/methods.ts).
    const methods = decideMethod(req.method ?? "GET", req.url, routed);
    if (methods.kind === "page-options") {
      res.writeHead(204, { allow: methods.allow }).end();
      return;
    }
    if (methods.kind === "not-allowed") {
      res.setHeader("allow", methods.allow);
      sendProblem(res, "method_not_allowed", `${req.method} is not supported here; use ${methods.allow}`, requestId);
      return;
    }
    if (methods.kind === "unrouted") {
      req.headers[UNROUTED_METHOD_HEADER] = req.method;
      req.method = "OPTIONS";
    }
    // A public API request goes to its route's built entrypoint, without Next's router (lib/http/entrypoints.ts).
    (entrypoints.match(req)?.dispatch ?? handle)(req, res).catch((error: unknown) => {
      // The path alone: a query may carry a request id (/request?id=...), which the logs need not keep.
      log.error("request failed outside the route handlers", {
        requestId,
        method: req.headers[UNROUTED_METHOD_HEADER] ?? req.method,
        path: (req.url ?? "/").split("?")[0],
        error,
      });
      if (res.headersSent) res.destroy();
      else sendProblem(res, "internal_error", "The request could not be completed; it has been logged", requestId);
    });
  };
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const incoming = req.headers[REQUEST_ID_HEADER];
    const requestId = requestIdFor(typeof incoming === "string" ? incoming : undefined);
    try {
      serve(req, res, requestId);
    } catch (error) {
      // Nothing a client sends may end in an exception outside every handler: it is logged, and answered 500.
      log.error("request failed in the web server", { requestId, method: req.method, path: (req.url ?? "/").split("?")[0], error });
      if (res.headersSent) res.destroy();
      else {
        res.setHeader("X-Request-Id", requestId);
        sendProblem(res, "internal_error", "The request could not be completed; it has been logged", requestId);
      }
    }
  });

  // Old counter rows are useless after their window (an hour for the limits, a day for the budget); any instance
  // may prune them.
  // One pruning at a time: a large backlog can take longer than the interval.
  let pruning: Promise<unknown> | undefined;
  const prune = () => {
    pruning ??= Promise.all([pruneRateLimitHits(appDb(), new Date(Date.now() - RATE_LIMIT_WINDOW_MS - 60_000)), pruneBudgetCounts(appDb())])
      .catch((error: unknown) => log.warn("pruning rate-limit hits or budget counters failed", { error }))
      .finally(() => (pruning = undefined));
  };
  // IP_RETENTION_DAYS (db/queries/ip-retention.ts): on the same timer, but on its own, so a first pass over a long
  // history does not hold back the counters' pruning. Any instance may run it, several at once.
  const retentionStop = new AbortController();
  let retaining: Promise<unknown> | undefined;
  const removePersonalData = () => {
    if (config.ipRetentionDays === 0) return;
    retaining ??= removeExpiredPersonalData(appDb(), { retentionDays: config.ipRetentionDays, signal: retentionStop.signal })
      .then((removed) => {
        if (Object.values(removed).some((n) => n > 0)) log.info("personal data past IP_RETENTION_DAYS removed", { days: config.ipRetentionDays, ...removed });
      })
      .catch((error: unknown) => log.warn("removing personal data past IP_RETENTION_DAYS failed (tried again at the next pass)", { error }))
      .finally(() => (retaining = undefined));
  };
  const pruneTimer = setInterval(() => {
    prune();
    removePersonalData();
  }, PRUNE_INTERVAL_MS);
  pruneTimer.unref();
  prune();
  removePersonalData();
  // worker.down: no worker can report its own absence (lib/webhooks/worker-watch.ts). Only with webhooks configured.
  const workerWatch =
    config.webhookUrls.length > 0 && config.webhookSecret
      ? new WorkerWatch({ db: appDb(), log: log.child({ component: "worker-watch" }), endpoints: config.webhookUrls, secret: config.webhookSecret })
      : undefined;
  workerWatch?.start();

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("web server stopping", { signal });
    const drainUntil = performance.now() + DRAIN_TIMEOUT_MS;
    clearInterval(pruneTimer);
    retentionStop.abort();
    await workerWatch?.stop().catch(() => {});
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
    const deadline = setTimeout(() => {
      log.warn("in-flight requests did not finish in time; closing their connections", { timeoutMs: DRAIN_TIMEOUT_MS });
      server.closeAllConnections();
    }, DRAIN_TIMEOUT_MS);
    await closed;
    clearInterval(idleSweep);
    clearTimeout(deadline);
    // Work a public route left to run after its answer (ctx.waitUntil) ends before the database pool closes, within
    // what is left of the same drain timeout (the supervisor's patience is set by it).
    const left = Math.max(0, drainUntil - performance.now());
    await withTimeout(entrypoints.close(), left, () => new Error(`still running ${DRAIN_TIMEOUT_MS} ms after the shutdown began`)).catch((error: unknown) =>
      log.warn("work after an API answer did not finish before shutdown", { error }),
    );
    await app.close().catch((error: unknown) => log.warn("closing Next failed", { error }));
    await closeAppDb().catch((error: unknown) => log.warn("closing the database pool failed", { error }));
    log.info("web server stopped", { signal });
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  stopWhenSupervisorGone(config);

  // Before the first connection: an answer written before any request is instrumented (a malformed one's 400) is
  // counted in http_problems_total too.
  getWebMetrics();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, () => {
      server.off("error", reject);
      resolve();
    });
  });
  void startProcessMetricsServer("web", log);
  log.info("web server listening", { port: config.port, url: `http://localhost:${config.port}`, trustProxy: config.trustProxy, pid: process.pid });
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    console.error(error.message);
  } else if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
    // Taken since npm start checked it: the supervisor starts us again with backoff, so the service comes up once
    // the port is freed.
    log.error("web server failed to start: PORT is in use by another process", { port: (error as { port?: number }).port, error: (error as Error).message });
  } else {
    log.error("web server failed to start", { error });
  }
  process.exit(1);
});
