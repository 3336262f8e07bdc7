import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect, type Socket } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@/lib/log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { webServerEnv } from "@/test/instances";
import { freePort } from "@/test/ports";

/**
 * The web process as `npm start` runs it (`server.ts`, the production build), on real HTTP (issue 11, items 4, 5
 * and 8): slow clients are answered 408 and disconnected, hundreds of them do not stop /health, every response
 * carries the security headers, a client-sent X-Forwarded-Proto makes nothing Secure, and /metrics bearer guesses
 * share the sign-in's limiter and audit.
 */

const ROOT = import.meta.dirname;
const ADMIN_TOKEN = "server-test-admin-token-0123456789-abcdef";
let t: TestDatabase;
let dataDir: string;
let web: ChildProcess | undefined;
let port: number;
let output = "";
let base: string;
/** A request that ended 100 days ago, written before the web server starts: its first retention pass clears it. */
let oldRequestId: string;

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms\n${output.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  await buildIfStale(createLogger({ component: "server-test" }));
  [t, dataDir, port] = await Promise.all([createTestDatabase(), mkdtemp(path.join(tmpdir(), "sponsorship-server-")), freePort()]);
  const oldWallet = `0x${randomBytes(20).toString("hex")}`;
  const [w] = await t.db.$client<{ id: string }[]>`INSERT INTO wallets (wallet_address) VALUES (${oldWallet}) RETURNING id`;
  const [old] = await t.db.$client<{ id: string }[]>`
    INSERT INTO sponsorship_requests (wallet_id, wallet_address, status, ip_address, client_key, user_agent, requested_at, rejected_at, eligibility_reason)
    VALUES (${w!.id}, ${oldWallet}, 'rejected', '10.4.5.6', '10.4.5.6', 'server-test', now() - interval '100 days', now() - interval '100 days', 'wallet_blocked')
    RETURNING id`;
  oldRequestId = old!.id;
  const env = webServerEnv({ port, dataDir, databaseUrl: t.url, adminToken: ADMIN_TOKEN });
  web = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "server.ts")], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  web.stdout?.on("data", (c: Buffer) => (output += c.toString()));
  web.stderr?.on("data", (c: Buffer) => (output += c.toString()));
  base = `http://127.0.0.1:${port}`;
  await until(
    "the web server answers /health",
    async () => {
      if (web!.exitCode !== null) throw new Error(`server.ts exited ${web!.exitCode}: ${output}`);
      return fetch(`${base}/health`).then(
        (r) => (r.status === 200 ? true : undefined),
        () => undefined,
      );
    },
    120_000,
  );
}, 15 * 60_000);

afterAll(async () => {
  if (web && web.exitCode === null) {
    const exited = new Promise((r) => web!.once("exit", r));
    web.kill("SIGTERM");
    const killer = setTimeout(() => web?.kill("SIGKILL"), 20_000);
    await exited;
    clearTimeout(killer);
  }
  await t?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

type Slow = { socket: Socket; received: () => string; closed: Promise<void> };

/** A client that sends `text` (half a request) and then nothing. */
function slowClient(text: string): Promise<Slow> {
  return new Promise((resolve, reject) => {
    let received = "";
    const socket = connect(port, "127.0.0.1");
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.on("data", (c: Buffer) => (received += c.toString()));
    socket.on("error", () => {});
    socket.once("connect", () => {
      socket.write(text);
      resolve({ socket, received: () => received, closed });
    });
    socket.once("error", reject);
  });
}

/** Resolves true when the connection closed within `ms`, false otherwise (a bound, not a speed measurement). */
const closesWithin = (slow: Slow, ms: number) =>
  Promise.race([slow.closed.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);

type Answer = { status: number; headers: IncomingHttpHeaders; body: string };

/** One request by node:http, which sends any method and header as given (fetch refuses TRACE). */
const exchange = (method: string, target: string, headers: Record<string, string> = {}, body?: string) =>
  new Promise<Answer>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, method, path: target, headers }, (res) => {
      let text = "";
      res.on("data", (c: Buffer) => (text += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });

const HALF_HEADERS = "GET /health HTTP/1.1\r\nHost: localhost\r\nUser-Agent: slowloris\r\n";

describe("requests Node gives up on before any route", () => {
  /** Sends `text` and collects everything until the server closes the connection. */
  const exchange = async (text: string) => {
    const client = await slowClient(text);
    expect(await closesWithin(client, 10_000)).toBe(true);
    const answer = client.received();
    const [head = "", body = ""] = answer.split("\r\n\r\n");
    return { head, problem: JSON.parse(body) as Record<string, unknown> };
  };

  it("answers headers over 16 KiB (a transaction hash of 17,000 characters in the URL) with 431 problem+json and an X-Request-Id", async () => {
    const { head, problem } = await exchange(`GET /sponsorship/tx/${"ab".repeat(8500)} HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(head).toMatch(/\r\ncontent-type: application\/problem\+json\r\n/i);
    const requestId = /\r\nx-request-id: ([^\r]+)/i.exec(head)?.[1];
    expect(problem).toMatchObject({ status: 431, code: "headers_too_large", requestId });
    // The security headers every response carries (docs/api.md).
    expect(head).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
  });

  it("answers such a request on a kept-alive connection too, whose earlier answers are complete", async () => {
    // A first request server.ts answers itself, whole (Content-Length), on a connection kept alive.
    const client = await slowClient("GET /%ZZ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    await until("the first answer", async () => (/^HTTP\/1\.1 400 [\s\S]*\r\n\r\n\{[\s\S]*\}$/.test(client.received()) ? true : undefined), 10_000);
    const first = client.received().length;
    client.socket.write("NOT HTTP AT ALL\r\n\r\n");
    expect(await closesWithin(client, 10_000)).toBe(true);
    // Before, only a connection never written to was answered: this one was closed without a word.
    expect(client.received().slice(first)).toMatch(/^HTTP\/1\.1 400 [\s\S]*"code":"bad_request"/);
  });

  it("answers a request that is not HTTP/1.1 with 400 bad_request problem+json and an X-Request-Id", async () => {
    const { head, problem } = await exchange("NOT HTTP AT ALL\r\n\r\n");
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/\r\nx-request-id: [^\r]+/i);
    expect(problem).toMatchObject({ status: 400, code: "bad_request", title: "Malformed HTTP request" });
  });
});

describe("slow clients (item 5)", () => {
  it("disconnects a client that sends half its headers and stalls within 15 s, answering 408", async () => {
    const slow = await slowClient(HALF_HEADERS);
    expect(await closesWithin(slow, 15_000)).toBe(true);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
    expect(slow.received()).toContain('"code":"request_timeout"');
  });

  it("keeps answering /health while 200 such clients are connected, and disconnects them all", async () => {
    const slows = await Promise.all(Array.from({ length: 200 }, () => slowClient(HALF_HEADERS)));
    const answer = await fetch(`${base}/health`, { signal: AbortSignal.timeout(10_000) });
    expect(answer.status).toBe(200);
    const closed = await Promise.all(slows.map((s) => closesWithin(s, 15_000)));
    expect(closed.every(Boolean)).toBe(true);
  });

  it("answers 408 and closes the connection when the whole request has not arrived within 30 s", async () => {
    const slow = await slowClient(
      `POST /wallets/register HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{"walletAddress":`,
    );
    expect(await closesWithin(slow, 40_000)).toBe(true);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
  }, 60_000);
});

describe("security headers and the Secure cookie (item 8)", () => {
  it("gives pages a nonce CSP with frame-ancestors 'none', nosniff and a Referrer-Policy, and no HSTS over plain HTTP", async () => {
    for (const page of ["/", "/request", "/dashboard"]) {
      const res = await fetch(`${base}${page}`, { headers: { "x-forwarded-proto": "https" } });
      expect(res.status, page).toBe(200);
      const csp = res.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("frame-ancestors 'none'");
      const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
      expect(nonce, csp).toBeTruthy();
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      // The client said https, but TRUST_PROXY=0: nothing believes it.
      expect(res.headers.get("strict-transport-security")).toBeNull();
      // Every script Next rendered carries the request's nonce, or the browser would refuse it.
      const html = await res.text();
      const scripts = html.match(/<script\b[^>]*>/g) ?? [];
      expect(scripts.length, page).toBeGreaterThan(0);
      for (const tag of scripts) expect(tag, page).toContain(`nonce="${nonce}"`);
    }
    const a = await fetch(`${base}/request`);
    const b = await fetch(`${base}/request`);
    expect(a.headers.get("content-security-policy")).not.toBe(b.headers.get("content-security-policy"));
  });

  it("sets no Secure flag because of a client-sent X-Forwarded-Proto when TRUST_PROXY=0", async () => {
    const res = await fetch(`${base}/admin/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-forwarded-proto": "https" },
      body: JSON.stringify({ token: ADMIN_TOKEN }),
    });
    expect(res.status).toBe(200);
    const cookie = res.headers.get("set-cookie") ?? "";
    expect(cookie).toContain("HttpOnly");
    expect(cookie).not.toMatch(/;\s*Secure/i);
  });
});

describe("/metrics bearer guesses (item 4)", () => {
  it("share the sign-in limiter: after five wrong tokens from an address, /metrics and sign-in both answer 429, and each guess is audited", async () => {
    await t.db.$client`DELETE FROM rate_limit_hits WHERE scope = 'admin_sign_in'`;
    const scrape = (token: string) => fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect((await scrape(ADMIN_TOKEN)).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await scrape(`wrong-guess-${i}-0123456789abcdefghijklmnop`)).status).toBe(401);
    const limited = await scrape("wrong-guess-6-0123456789abcdefghijklmnop");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Even the right token waits now: a guesser learns nothing past the limit.
    expect((await scrape(ADMIN_TOKEN)).status).toBe(429);
    const signIn = await fetch(`${base}/admin/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: ADMIN_TOKEN }),
    });
    expect(signIn.status).toBe(429);
    const audited = await t.db.$client<{ n: number }[]>`SELECT count(*)::int AS n FROM admin_actions
      WHERE action = 'sign_in_failed' AND details->>'channel' = 'metrics' AND ip_address = '127.0.0.1'`;
    expect(audited[0]!.n).toBe(5);
  });
});

describe("/metrics and the HTTP rules of every route", () => {
  it("answers OPTIONS 204 with Allow, and a foreign Origin 403 origin_not_allowed before any credential is looked at", async () => {
    const options = await fetch(`${base}/metrics`, { method: "OPTIONS" });
    expect(options.status).toBe(204);
    expect(options.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    const foreign = await fetch(`${base}/metrics`, { headers: { origin: "https://evil.example", authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { code: string }).code).toBe("origin_not_allowed");
    expect(foreign.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("problem answers by code (http_problems_total)", () => {
  it("counts each problem answer by its code: a pause's 503 as sponsorships_paused, apart from other 503s, and what server.ts answers itself", async () => {
    await t.db.$client`DELETE FROM rate_limit_hits WHERE scope = 'admin_sign_in'`;
    const counted = async (code: string) => {
      const text = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
      const line = text.split("\n").find((l) => l.startsWith("http_problems_total{") && l.includes(`code="${code}"`));
      return line === undefined ? 0 : Number(line.split(" ").at(-1));
    };
    const before = { paused: await counted("sponsorships_paused"), badRequest: await counted("bad_request") };
    const request = () =>
      fetch(`${base}/sponsorship/request`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ walletAddress: `0x${randomBytes(20).toString("hex")}` }),
      });
    await t.db.$client`INSERT INTO service_state (id, paused, pause_reason, paused_at, paused_by, updated_at)
      VALUES (1, true, 'server test', now(), 'server-test', now())
      ON CONFLICT (id) DO UPDATE SET paused = true, pause_reason = 'server test', paused_at = now(), paused_by = 'server-test', updated_at = now()`;
    try {
      for (let i = 0; i < 3; i++) {
        const refused = await request();
        expect(refused.status).toBe(503);
        expect(((await refused.json()) as { code: string }).code).toBe("sponsorships_paused");
      }
    } finally {
      await t.db.$client`UPDATE service_state SET paused = false, pause_reason = NULL, paused_at = NULL, paused_by = NULL, updated_at = now() WHERE id = 1`;
    }
    // Answered by server.ts before any route: a request line that is not HTTP/1.1.
    const malformed = await slowClient("NOT HTTP AT ALL\r\n\r\n");
    expect(await closesWithin(malformed, 10_000)).toBe(true);
    expect(malformed.received()).toMatch(/^HTTP\/1\.1 400 /);
    expect(await counted("sponsorships_paused")).toBe(before.paused + 3);
    expect(await counted("bad_request")).toBe(before.badRequest + 1);
    // Resumed: the same request is no problem (404 wallet_not_registered is, and is counted as such).
    expect((await request()).status).toBe(404);
    expect(await counted("sponsorships_paused")).toBe(before.paused + 3);
  });
});

describe("methods Next.js cannot dispatch or would render a page for (decisions.md: 405 with Allow)", () => {
  it("answers TRACE, PROPFIND and QUERY on an API route 405 problem+json with the route's own Allow", async () => {
    for (const [method, pathname, allow] of [
      ["TRACE", "/health", "GET, HEAD, OPTIONS"],
      ["PROPFIND", "/sponsorship/request", "POST, OPTIONS"],
      ["QUERY", `/wallets/0x${"ab".repeat(20)}`, "GET, HEAD, OPTIONS"],
      ["TRACE", "/docs", "GET, HEAD, OPTIONS"],
    ] as const) {
      const answer = await exchange(method, pathname);
      expect([method, pathname, answer.status, answer.headers.allow]).toEqual([method, pathname, 405, allow]);
      expect(answer.headers["content-type"]).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(answer.body)).toMatchObject({ status: 405, code: "method_not_allowed", requestId: answer.headers["x-request-id"] });
    }
    // A path no route serves is 404 whatever the method; OPTIONS on a route is still its preflight (204).
    expect((await exchange("TRACE", "/no/such/path")).status).toBe(404);
    const options = await exchange("OPTIONS", "/sponsorship/request");
    expect([options.status, options.headers.allow]).toEqual([204, "POST, OPTIONS"]);
    // The marker is server.ts's alone: a client that sends it on an OPTIONS gets the preflight, not a 405.
    expect((await exchange("OPTIONS", "/health", { "x-unrouted-method": "TRACE" })).status).toBe(204);
  });

  it("answers a method a page does not take 405 with Allow instead of rendering the page, and OPTIONS 204", async () => {
    for (const [method, pathname, allow] of [
      ["PUT", "/request", "GET, HEAD, OPTIONS"],
      ["DELETE", "/", "GET, HEAD, OPTIONS"],
      ["POST", "/request", "GET, HEAD, OPTIONS"],
      ["TRACE", "/request", "GET, HEAD, OPTIONS"],
      ["PATCH", "/dashboard", "GET, HEAD, POST, OPTIONS"],
      ["PROPFIND", "/dashboard/requests/00000000-0000-0000-0000-000000000000", "GET, HEAD, POST, OPTIONS"],
      // As Next routes them: a trailing slash, an escaped letter.
      ["PUT", "/request/", "GET, HEAD, OPTIONS"],
      ["DELETE", "/%72equest", "GET, HEAD, OPTIONS"],
    ] as const) {
      const answer = await exchange(method, pathname);
      expect([method, pathname, answer.status, answer.headers.allow]).toEqual([method, pathname, 405, allow]);
      expect(JSON.parse(answer.body)).toMatchObject({ status: 405, code: "method_not_allowed" });
    }
    const options = await exchange("OPTIONS", "/request");
    expect([options.status, options.headers.allow]).toEqual([204, "GET, HEAD, OPTIONS"]);
    // What the pages do take is still Next's: the page itself.
    expect((await exchange("GET", "/request")).status).toBe(200);
    expect((await exchange("HEAD", "/dashboard")).status).toBe(200);
  });
});

describe("the public API through its routes' built entrypoints (issue 15; lib/http/entrypoints.ts)", () => {
  /** The same request by another spelling of its path, which Next's router serves (a trailing slash). */
  const throughNext = (target: string) => target.replace(/^([^?]*)/, "$1/");
  /** What may differ between two answers to the same request: the moment, the ids, how the body is framed. */
  const VARYING = new Set([
    "date",
    "x-request-id",
    "vary",
    "content-encoding",
    "content-length",
    "transfer-encoding",
    "content-security-policy",
    "connection",
    "keep-alive",
  ]);
  const comparable = (a: Answer) => ({
    status: a.status,
    headers: Object.fromEntries(Object.entries(a.headers).filter(([name]) => !VARYING.has(name))),
    body: a.body.replace(/"requestId":"[^"]+"/, '"requestId":"-"'),
  });
  const randomWallet = () => `0x${randomBytes(20).toString("hex")}`;

  it("serves an API path by its route's entrypoint, not through Next's router (whose Vary names its client router's headers)", async () => {
    const wallet = randomWallet();
    const registered = await exchange("POST", "/wallets/register", { "content-type": "application/json" }, JSON.stringify({ walletAddress: wallet }));
    expect([registered.status, registered.headers.vary]).toEqual([201, "Origin"]);
    for (const target of ["/health", `/wallets/${wallet}`, "/sponsorship/00000000-0000-0000-0000-000000000000"]) {
      expect([target, (await exchange("GET", target)).headers.vary]).toEqual([target, "Origin"]);
    }
    // What no public route names exactly is Next's, as before: the catch-all's 404, another spelling, the admin's.
    for (const target of ["/no/such/path", "/health/", "/%68ealth", "/admin/overview"]) {
      expect([target, (await exchange("GET", target)).headers.vary]).toEqual([target, expect.stringContaining("rsc")]);
    }
  });

  it("answers every kind of request as Next's router does: the same status, headers and body", async () => {
    const wallet = randomWallet();
    await exchange("POST", "/wallets/register", { "content-type": "application/json" }, JSON.stringify({ walletAddress: wallet }));
    const json = { "content-type": "application/json" };
    const cases: [string, string, Record<string, string>?, string?][] = [
      ["GET", `/wallets/${wallet}`],
      ["HEAD", `/wallets/${wallet}`],
      ["GET", `/wallets/${wallet.toUpperCase().replace("0X", "0x")}`],
      ["GET", `/wallets/${wallet}/history?limit=2`],
      ["GET", `/wallets/${wallet}/history?limit=0`],
      ["GET", "/wallets/0x12"],
      ["GET", "/sponsorship/not-a-uuid"],
      ["GET", "/sponsorship/00000000-0000-0000-0000-000000000000"],
      ["GET", `/sponsorship/tx/0x${"ab".repeat(32)}`],
      ["GET", "/relay/00000000-0000-0000-0000-000000000000"],
      ["GET", "/faucet"],
      ["OPTIONS", "/sponsorship/request"],
      ["OPTIONS", "/sponsorship/request", { origin: "https://elsewhere.example", "access-control-request-method": "POST" }],
      ["GET", `/wallets/${wallet}`, { origin: "https://elsewhere.example" }],
      ["TRACE", "/health"],
      ["DELETE", "/wallets/register"],
      ["POST", "/wallets/register", { "content-type": "text/plain" }, "walletAddress"],
      ["POST", "/wallets/register", json, JSON.stringify({ walletAddress: "x".repeat(17 * 1024) })],
      ["POST", "/wallets/register", json, "{not json"],
      ["POST", "/sponsorship/request", json, JSON.stringify({ walletAddress: wallet, extra: 1 })],
      ["POST", "/sponsorship/request", json, JSON.stringify({ walletAddress: 7 })],
    ];
    for (const [method, target, headers, body] of cases) {
      const [direct, routed] = [await exchange(method, target, headers, body), await exchange(method, throughNext(target), headers, body)];
      expect([method, target, comparable(direct)]).toEqual([method, target, comparable(routed)]);
      // Each went the way it was meant to (were the entrypoint lost, Next would be compared with Next).
      expect([method, target, direct.headers.vary, routed.headers.vary]).toEqual([method, target, "Origin", expect.stringContaining("rsc")]);
    }
    // Answers that differ in their values only: a registration of another fresh wallet, /health's uptime.
    const shape = (a: Answer) => ({
      status: a.status,
      headers: Object.keys(comparable(a).headers).sort(),
      body: a.body ? Object.keys(JSON.parse(a.body) as object).sort() : [],
    });
    for (const [method, target, body] of [
      ["POST", "/wallets/register", () => JSON.stringify({ walletAddress: randomWallet() })],
      ["GET", "/health", () => undefined],
    ] as const) {
      const [direct, routed] = [await exchange(method, target, json, body()), await exchange(method, throughNext(target), json, body())];
      expect([target, shape(direct)]).toEqual([target, shape(routed)]);
      expect([target, direct.headers.vary, routed.headers.vary]).toEqual([target, "Origin", expect.stringContaining("rsc")]);
    }
    // A query name Next reserves for its routing would, outside Next's server, set the path's value: Next takes it.
    const other = randomWallet();
    for (const query of [`nxtPaddress=${other}`, `nxt%50address=${other}`]) {
      const reserved = await exchange("GET", `/wallets/${wallet}?${query}`);
      expect([query, reserved.status, JSON.parse(reserved.body).walletAddress]).toEqual([query, 200, wallet]);
    }
    expect((await exchange("GET", `/wallets/${wallet}.rsc`)).status).toBe(400);
    // Next's client router's requests, and its internal headers, are Next's to answer as it always did.
    for (const headers of [{ rsc: "1" }, { "x-middleware-prefetch": "1" }, { "x-nextjs-data": "1" }] as Record<string, string>[]) {
      const [direct, routed] = [await exchange("GET", `/wallets/${wallet}`, headers), await exchange("GET", throughNext(`/wallets/${wallet}`), headers)];
      expect([headers, direct.status, direct.headers.vary]).toEqual([headers, routed.status, routed.headers.vary]);
    }
  });

  it("sends an answer larger than the socket's buffer whole (a wallet's history of 100 requests)", async () => {
    const wallet = randomWallet();
    await t.db.$client.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      const [w] = await tx<{ id: string }[]>`INSERT INTO wallets (wallet_address) VALUES (${wallet}) RETURNING id`;
      await tx`
        INSERT INTO sponsorship_requests (wallet_id, wallet_address, status, ip_address, user_agent, requested_at, failed_at, failure_reason)
        SELECT ${w!.id}, ${wallet}, 'failed', '10.1.2.3', 'server-test', now() - make_interval(secs => g), now(), 'seeded'
        FROM generate_series(1, 100) AS g`;
    });
    const answer = await exchange("GET", `/wallets/${wallet}/history?limit=100`);
    expect(answer.status).toBe(200);
    expect(answer.body.length).toBeGreaterThan(16 * 1024);
    expect((JSON.parse(answer.body) as { requests: unknown[] }).requests).toHaveLength(100);
  });

  it("still compresses /openapi.json, which Next serves (70 KB; a public API answer is 20 KB at most)", async () => {
    const res = await new Promise<{ encoding: string | undefined; length: number }>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, path: "/openapi.json", headers: { "accept-encoding": "gzip" } }, (r) => {
        let length = 0;
        r.on("data", (c: Buffer) => (length += c.length));
        r.on("end", () => resolve({ encoding: r.headers["content-encoding"], length }));
      });
      req.on("error", reject);
      req.end();
    });
    expect(res.encoding).toBe("gzip");
    expect(res.length).toBeLessThan(20_000);
  });
});

describe("the web server's housekeeping (db/queries/ip-retention.ts)", () => {
  it("removes, from its start, the IP address, client key and User-Agent of a request that ended more than IP_RETENTION_DAYS (90) ago", async () => {
    const row = await until(
      "the start's retention pass",
      async () => {
        const [r] = await t.db.$client<{ ip: string | null; key: string | null; agent: string | null; status: string }[]>`
          SELECT ip_address AS ip, client_key AS key, user_agent AS agent, status FROM sponsorship_requests WHERE id = ${oldRequestId}`;
        return r?.ip === null ? r : undefined;
      },
      30_000,
    );
    expect(row).toEqual({ ip: null, key: null, agent: null, status: "rejected" });
    expect((await exchange("GET", `/sponsorship/${oldRequestId}`)).status).toBe(200);
  });
});

describe("request lines and framing the open internet sends (lib/http/request-target.ts; audit of 2026-12-02)", () => {
  /** Writes `text` on one connection and collects what comes back until `done` says so or the server closes it. */
  const raw = async (text: string, done: (received: string) => boolean = () => false) => {
    const client = await slowClient(text);
    await Promise.race([client.closed, until("the answers", async () => (done(client.received()) ? true : undefined), 10_000)]);
    client.socket.destroy();
    return client.received();
  };
  const statusLines = (received: string) => [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
  /** One whole answer: its head ends and its body is as long as it says. */
  const complete = (received: string) => {
    const [head, body = ""] = received.split("\r\n\r\n", 2) as [string, string?];
    const length = /\r\ncontent-length: (\d+)/i.exec(head)?.[1];
    return received.includes("\r\n\r\n") && (length === undefined ? /^HTTP\/1\.1 (204|304)/.test(head) : Buffer.byteLength(body) >= Number(length));
  };
  const problemOf = (received: string) => JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)) as Record<string, unknown>;

  it("answers targets that are not plain paths at once, never with an exception: //a:b, //[, a broken absolute URL, *", async () => {
    const before = output.length;
    for (const target of ["//a:b", "//[", "//a:99999"]) {
      const received = await raw(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      // Before: no answer for 30 s, then a 408 that blamed the client, and an uncaught TypeError in the log.
      expect([target, statusLines(received)[0]]).toEqual([target, expect.any(Number)]);
      expect(statusLines(received)[0]).not.toBe(408);
    }
    for (const target of ["http://[::1", "http://x:99999/health", "*"]) {
      const received = await raw(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect([target, statusLines(received)]).toEqual([target, [400]]);
      expect(problemOf(received)).toMatchObject({ code: "invalid_path" });
    }
    const options = await raw(`OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    expect(statusLines(options)).toEqual([204]);
    expect(options).toMatch(/\r\nallow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n/i);
    expect(output.slice(before)).not.toMatch(/uncaughtException|Invalid URL/);
  });

  it("serves an absolute-form target as its path (RFC 9112 §3.2.2), not with a redirect to itself", async () => {
    // node:http sends `path` as the request target, verbatim.
    const answer = await exchange("GET", `http://127.0.0.1:${port}/health`, { host: "elsewhere.example" });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toHaveProperty("checks.database");
  });

  it("serves a request that offers an upgrade (h2c) as HTTP/1.1, also after Next has served a request", async () => {
    expect((await exchange("GET", "/openapi.json")).status).toBe(200);
    for (const target of ["/health", "/no/such/path"]) {
      const received = await raw(
        `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n`,
        complete,
      );
      // Before: Next's upgrade handler closed the connection without a byte.
      expect([target, statusLines(received)]).toEqual([target, [target === "/health" ? 200 : 404]]);
    }
  });

  it("answers a pipelined request's predecessor whole before refusing the malformed one after it", async () => {
    const body = JSON.stringify({ walletAddress: `0x${randomBytes(20).toString("hex")}` });
    const first = `POST /wallets/register HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    for (const second of ["GARBAGE\r\n\r\n", `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(17 * 1024)}\r\n\r\n`]) {
      const received = await raw(first.replace(/0x[0-9a-f]{40}/, `0x${randomBytes(20).toString("hex")}`) + second);
      // Before: only the 400 or 431 came back, for a registration that had been made.
      expect(statusLines(received)).toEqual([201, second.startsWith("GARBAGE") ? 400 : 431]);
    }
  });

  it("answers Next's own pages and its image optimiser 404 not_found as problem+json, whatever the method", async () => {
    for (const [method, target] of [
      ["GET", "/_not-found"],
      ["GET", "/_global-error"],
      ["POST", "/_global-error"],
      ["GET", "/_error"],
      ["GET", "/500"],
      ["GET", "/404"],
      ["GET", "/_next/image?url=/x&w=64&q=75"],
    ] as const) {
      const answer = await exchange(method, target);
      expect([method, target, answer.status, answer.headers["content-type"]]).toEqual([method, target, 404, "application/problem+json"]);
      expect(JSON.parse(answer.body)).toMatchObject({ code: "not_found" });
    }
  });

  it("refuses an HTTP/1.1 request without Host, or with two, as 400 bad_request problem+json; an Expect it cannot meet 417", async () => {
    for (const head of ["GET /health HTTP/1.1\r\n", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n"]) {
      const received = await raw(`${head}\r\n`, complete);
      expect([head, statusLines(received)]).toEqual([head, [400]]);
      expect(received).toMatch(/\r\nx-request-id: [^\r]+/i);
      expect(problemOf(received)).toMatchObject({ code: "bad_request" });
    }
    expect(statusLines(await raw("GET /health HTTP/1.0\r\n\r\n"))).toEqual([200]);
    const expectation = await raw("GET /health HTTP/1.1\r\nHost: x\r\nExpect: foo\r\n\r\n", complete);
    expect(statusLines(expectation)).toEqual([417]);
    expect(problemOf(expectation)).toMatchObject({ code: "expectation_failed", status: 417 });
  });
});
