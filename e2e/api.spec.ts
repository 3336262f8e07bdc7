import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import path from "node:path";
import { expect, type APIRequestContext, type APIResponse } from "@playwright/test";
import fc from "fast-check";
import postgres from "postgres";
import { healthResponse, problemResponseSchema, sponsorshipRequestResponse, walletResponse } from "@/lib/sponsorship/schemas";
import { freePort } from "@/test/ports";
import { test } from "./openapi-checked";
import { E2E } from "./stack";

/**
 * The API over real HTTP, against `npm start`'s stack (TRUST_PROXY=0) and against extra `tsx server.ts` processes
 * on the same database with other settings (TRUST_PROXY=1, small limits), started here and stopped by pid.
 * What only real HTTP can show: the client address comes from the socket, not from headers a client can forge.
 * Every answer `request` gets is checked against the served /openapi.json (e2e/openapi-checked.ts).
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const address = () => `0x${randomBytes(20).toString("hex")}`;
/** An address of the benchmarking range 198.18.0.0/15: never a real client. */
const testIp = () => `198.18.${randomInt(0, 256)}.${randomInt(1, 255)}`;

async function expectProblem(response: APIResponse, status: number, code: string) {
  expect(response.status(), await response.text()).toBe(status);
  expect(response.headers()["content-type"]).toBe("application/problem+json");
  const problem = problemResponseSchema.parse(await response.json());
  expect(problem.code).toBe(code);
  expect(problem.requestId).toBe(response.headers()["x-request-id"]);
  return problem;
}

async function register(request: APIRequestContext, base: string, wallet: string, headers: Record<string, string> = {}) {
  const response = await request.post(`${base}/wallets/register`, { data: { walletAddress: wallet }, headers });
  expect(response.status(), await response.text()).toBe(201);
}

type Server = { baseURL: string; pid: number; stop: () => Promise<void> };

/** Another web process on the stack's database and chain, with its own settings. */
async function startServer(env: Record<string, string>): Promise<Server> {
  const port = await freePort();
  const output: string[] = [];
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "server.ts")], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: "production",
      PORT: String(port),
      DATABASE_URL: E2E.databaseUrl,
      RPC_URL: E2E.rpcUrl,
      DATA_DIR: E2E.dataDir,
      LOG_LEVEL: "warn",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (c: Buffer) => output.push(c.toString()));
  child.stderr?.on("data", (c: Buffer) => output.push(c.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const baseURL = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server.ts exited during start-up:\n${output.join("")}`);
    const up = await fetch(`${baseURL}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`server.ts did not answer within 60 s:\n${output.join("")}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    baseURL,
    pid: child.pid!,
    stop: async () => {
      if (child.exitCode !== null) return;
      process.kill(child.pid!, "SIGTERM");
      await exited;
      expect(child.exitCode, output.join("")).toBe(0);
    },
  };
}

test.describe.serial("the API over real HTTP", () => {
  let sql: postgres.Sql;
  test.beforeAll(() => {
    sql = postgres(E2E.databaseUrl, { max: 2, onnotice: () => {} });
  });
  test.afterAll(async () => {
    // Automatic blocks this spec caused for the loopback address must not outlive it (the other specs use it).
    await sql`UPDATE blocks SET lifted_at = now(), lifted_by = 'e2e:api.spec', lift_reason = 'test clean-up'
      WHERE subject_type = 'ip' AND subject = '127.0.0.1' AND lifted_at IS NULL`;
    await sql.end();
  });

  test("GET /health answers 200 with the documented shape", async ({ request }) => {
    const response = await request.get("/health");
    expect(response.status()).toBe(200);
    const health = healthResponse.parse(await response.json());
    expect(health.checks.database.status).toBe("ok");
    expect(health.checks.chain.status).toBe("ok");
  });

  test("a forged X-Forwarded-For or x-client-ip from a direct client does not change ipAddress (TRUST_PROXY=0)", async ({ request }) => {
    const wallet = address();
    await register(request, "", wallet);
    const response = await request.post("/sponsorship/request", {
      data: { walletAddress: wallet },
      headers: { "x-forwarded-for": testIp(), "x-client-ip": testIp(), "user-agent": "e2e-api" },
    });
    expect(response.status()).toBe(201);
    const created = sponsorshipRequestResponse.parse(await response.json());
    expect(created.ipAddress).toBe("127.0.0.1");
    expect(created.userAgent).toBe("e2e-api");
  });

  test("a forged X-Forwarded-For does not change the client's limits (TRUST_PROXY=0)", async ({ request }) => {
    // The hour's earlier hits of 127.0.0.1 count too: allow exactly three more.
    const rows = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM rate_limit_hits
      WHERE scope = 'sponsorship_ip' AND key = '127.0.0.1' AND created_at > now() - interval '1 hour'`;
    const n = rows[0]?.n ?? 0;
    const server = await startServer({ TRUST_PROXY: "0", RATE_LIMIT_IP_PER_HOUR: String(n + 3), REGISTER_LIMIT_IP_PER_HOUR: "1000000" });
    try {
      for (let i = 0; i < 3; i++) {
        const wallet = address();
        await register(request, server.baseURL, wallet);
        const response = await request.post(`${server.baseURL}/sponsorship/request`, {
          data: { walletAddress: wallet },
          headers: { "x-forwarded-for": testIp() },
        });
        expect(response.status(), await response.text()).toBe(201);
      }
      const wallet = address();
      await register(request, server.baseURL, wallet);
      const refused = await request.post(`${server.baseURL}/sponsorship/request`, {
        data: { walletAddress: wallet },
        headers: { "x-forwarded-for": testIp() },
      });
      await expectProblem(refused, 429, "rate_limited");
      expect(Number(refused.headers()["retry-after"])).toBeGreaterThanOrEqual(1);
    } finally {
      await server.stop();
      await sql`UPDATE blocks SET lifted_at = now(), lifted_by = 'e2e:api.spec', lift_reason = 'test clean-up'
        WHERE subject_type = 'ip' AND subject = '127.0.0.1' AND lifted_at IS NULL`;
    }
  });

  test("with TRUST_PROXY=1 the right-most X-Forwarded-For entry is the client, for ipAddress and for limits", async ({ request }) => {
    const server = await startServer({ TRUST_PROXY: "1", RATE_LIMIT_IP_PER_HOUR: "2" });
    try {
      const client = testIp();
      const other = testIp();
      const via = (ip: string) => ({ "x-forwarded-for": `6.6.6.6, ${ip}` });
      for (let i = 0; i < 2; i++) {
        const wallet = address();
        await register(request, server.baseURL, wallet, via(client));
        const response = await request.post(`${server.baseURL}/sponsorship/request`, { data: { walletAddress: wallet }, headers: via(client) });
        expect(response.status(), await response.text()).toBe(201);
        expect(sponsorshipRequestResponse.parse(await response.json()).ipAddress).toBe(client);
      }
      const wallet = address();
      await register(request, server.baseURL, wallet, via(client));
      await expectProblem(
        await request.post(`${server.baseURL}/sponsorship/request`, { data: { walletAddress: wallet }, headers: via(client) }),
        429,
        "rate_limited",
      );
      // Another client behind the same proxy is served meanwhile.
      const served = await request.post(`${server.baseURL}/sponsorship/request`, { data: { walletAddress: wallet }, headers: via(other) });
      expect(served.status(), await served.text()).toBe(201);
      expect(sponsorshipRequestResponse.parse(await served.json()).ipAddress).toBe(other);
    } finally {
      await server.stop();
    }
  });

  test("X-Request-Id is echoed when valid and generated otherwise, on successes, problems and Next's own answers", async ({ request }) => {
    const echoed = await request.get("/health", { headers: { "x-request-id": "e2e.trace-1" } });
    expect(echoed.headers()["x-request-id"]).toBe("e2e.trace-1");
    const problem = await expectProblem(await request.get(`/wallets/${address()}`, { headers: { "x-request-id": "e2e.trace-2" } }), 404, "wallet_not_found");
    expect(problem.requestId).toBe("e2e.trace-2");
    const generated = await request.get("/health", { headers: { "x-request-id": "bad id!" } });
    expect(generated.headers()["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
    const page = await request.get("/request");
    expect(page.headers()["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("a method a route does not serve is 405 with Allow", async ({ request }) => {
    const response = await request.delete("/sponsorship/request");
    await expectProblem(response, 405, "method_not_allowed");
    expect(response.headers()["allow"]).toBe("POST, OPTIONS");
    const get = await request.get("/wallets/register");
    await expectProblem(get, 405, "method_not_allowed");
    expect(get.headers()["allow"]).toBe("POST, OPTIONS");
  });

  test("bodies: over 16 KiB is 413, not JSON content type is 415, not a JSON object is 400", async ({ request }) => {
    const big = JSON.stringify({ walletAddress: address(), pad: "x".repeat(20 * 1024) });
    await expectProblem(await request.post("/wallets/register", { data: big, headers: { "content-type": "application/json" } }), 413, "payload_too_large");
    await expectProblem(
      await request.post("/wallets/register", { data: JSON.stringify({ walletAddress: address() }), headers: { "content-type": "text/plain" } }),
      415,
      "unsupported_media_type",
    );
    await expectProblem(await request.post("/sponsorship/request", { data: "[1]", headers: { "content-type": "application/json" } }), 400, "invalid_json");
  });

  test("CORS: a preflight from the app's own origin is 204 with the methods; a foreign origin is 403 without CORS headers", async ({ request }) => {
    const own = await request.fetch("/sponsorship/request", {
      method: "OPTIONS",
      headers: { origin: E2E.baseURL, "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
    });
    expect(own.status()).toBe(204);
    expect(own.headers()["access-control-allow-origin"]).toBe(E2E.baseURL);
    expect(own.headers()["access-control-allow-methods"]).toContain("POST");
    expect(own.headers()["access-control-allow-headers"]).toContain("Content-Type");
    expect(own.headers()["vary"]).toContain("Origin");

    const foreign = await request.fetch("/sponsorship/request", {
      method: "OPTIONS",
      headers: { origin: "https://evil.example", "access-control-request-method": "POST" },
    });
    await expectProblem(foreign, 403, "origin_not_allowed");
    expect(Object.keys(foreign.headers()).filter((h) => h.startsWith("access-control-"))).toEqual([]);
    await expectProblem(await request.get("/health", { headers: { origin: "https://evil.example" } }), 403, "origin_not_allowed");
  });

  test("unknown and malformed paths are problems, not HTML pages or 500s", async ({ request }) => {
    await expectProblem(await request.get("/no/such/endpoint"), 404, "not_found");
    await expectProblem(await request.get("/wallets/%ZZ"), 400, "invalid_path");
    await expectProblem(await request.get("/wallets/0x12"), 400, "invalid_address");
    // Answered before Next, with the same CORS rules: the own origin may read it, a foreign one is refused.
    const own = await request.get("/wallets/%ZZ", { headers: { origin: E2E.baseURL } });
    await expectProblem(own, 400, "invalid_path");
    expect(own.headers()["access-control-allow-origin"]).toBe(E2E.baseURL);
    await expectProblem(await request.get("/wallets/%ZZ", { headers: { origin: "https://evil.example" } }), 403, "origin_not_allowed");
  });

  test("GET /openapi.json serves the OpenAPI 3.1 document", async ({ request }) => {
    const response = await request.get("/openapi.json");
    expect(response.status()).toBe(200);
    expect(await response.json()).toMatchObject({ openapi: "3.1.0", paths: { "/sponsorship/request": { post: {} } } });
  });

  test("random GET paths and queries never yield a 500 over real HTTP", async ({ request }) => {
    const segment = fc.oneof(fc.string({ unit: "grapheme", maxLength: 20 }), fc.uuid(), fc.constantFrom("%ZZ", "%", "..", "register", "tx"));
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/wallets/", "/sponsorship/", "/sponsorship/tx/", "/relay/", "/"),
        fc.array(segment, { minLength: 1, maxLength: 3 }),
        fc.constantFrom("", "?limit=0", "?cursor=x", "?limit=5&cursor=00000000-0000-0000-0000-000000000000"),
        async (prefix, segments, query) => {
          const encoded = segments.map((s) => (s.startsWith("%") ? s : encodeURIComponent(s) || "x")).join("/");
          const response = await request.get(`${prefix}${encoded}${query}`);
          expect(response.status(), `${prefix}${encoded}${query}`).toBeLessThan(500);
          expect(response.headers()["x-request-id"]).toBeTruthy();
          if (response.status() >= 400 && response.headers()["content-type"]?.includes("json")) problemResponseSchema.parse(await response.json());
        },
      ),
      { numRuns: 80 },
    );
  });

  test("a wallet registered in any case is found in any case", async ({ request }) => {
    const wallet = address();
    await register(request, "", wallet.toUpperCase().replace("0X", "0x"));
    const found = await request.get(`/wallets/${wallet.toUpperCase().replace("0X", "0x")}`);
    expect(walletResponse.parse(await found.json()).walletAddress).toBe(wallet);
  });

  test("GET /metrics is Prometheus text for the administrator's credential only", async ({ request }) => {
    expect((await request.get("/metrics")).status()).toBe(401);
    expect((await request.get("/metrics", { headers: { authorization: "Bearer not-the-token-0123456789" } })).status()).toBe(401);
    await request.get("/health");
    const response = await request.get("/metrics", { headers: { authorization: `Bearer ${E2E.adminToken}` } });
    expect(response.status()).toBe(200);
    expect(response.headers()["content-type"]).toContain("text/plain");
    const text = await response.text();
    expect(text).toMatch(/^http_requests_total\{[^}]*route="\/health"[^}]*\} \d+/m);
    expect(text).toMatch(/^http_request_duration_seconds_bucket\{/m);
    expect(text).toMatch(/^sponsorship_treasury_balance_wei\{?[^\n]*\d/m);
  });
});
