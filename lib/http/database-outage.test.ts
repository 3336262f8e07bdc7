import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDatabase, createDatabase, type Database } from "@/db/client";
import { parseConfig } from "@/lib/config";
import { healthResponse, sponsorshipRequestResponse } from "@/lib/sponsorship/schemas";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { startTcpRelay, type TcpRelay } from "@/test/tcp-relay";
import { setAppContextForTests, WEB_POOL_LIMITS } from "./app-context";
import { callApi, expectProblem, randomAddress } from "@/test/api-client";
import { unavailableResponse } from "./route";

/**
 * Issue 11, item 2 (decisions.md, "Wire format"): while PostgreSQL cannot be reached, every endpoint that needs it
 * answers 503 `unavailable` with Retry-After, never a 500. The outage is real: the route handlers reach a real
 * PostgreSQL through a TCP relay that the test cuts (every connection dropped, new ones refused).
 */

let t: TestDatabase;
let relay: TcpRelay;
let db: Database;

beforeAll(async () => {
  t = await createTestDatabase();
  const target = new URL(t.url);
  relay = await startTcpRelay({ host: target.hostname, port: Number(target.port) });
  const viaRelay = new URL(t.url);
  viaRelay.port = String(relay.port);
  db = createDatabase(viaRelay.toString(), { max: 4, applicationName: "sponsorship-web", ...WEB_POOL_LIMITS });
  const config = parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", DATABASE_URL: viaRelay.toString() });
  setAppContextForTests({ db, config });
});

afterAll(async () => {
  setAppContextForTests({});
  await relay?.restore().catch(() => {});
  await closeDatabase(db).catch(() => {});
  await relay?.close();
  await t?.drop();
});

describe("a database outage", () => {
  it("answers 503 unavailable with Retry-After on every endpoint that needs the database, and recovers with it", async () => {
    const wallet = randomAddress();
    expect((await callApi({ path: "/wallets/register", body: { walletAddress: wallet } })).status).toBe(201);
    const created = await callApi({ path: "/sponsorship/request", body: { walletAddress: wallet }, ip: "198.51.100.77" });
    expect(created.status).toBe(201);
    const request = sponsorshipRequestResponse.parse(created.json);

    await relay.cut();
    const calls = [
      { path: "/wallets/register", body: { walletAddress: randomAddress() } },
      { path: "/sponsorship/request", body: { walletAddress: wallet } },
      { path: `/wallets/${wallet}` },
      { path: `/wallets/${wallet}/history` },
      { path: `/sponsorship/${request.id}` },
      { path: `/sponsorship/tx/0x${"ab".repeat(32)}` },
      { path: `/relay/${randomUUID()}` },
    ];
    for (const call of calls) {
      const answer = await callApi(call);
      const problem = expectProblem(answer, 503, "unavailable");
      expect(Number(answer.headers.get("retry-after")), call.path).toBeGreaterThanOrEqual(1);
      // Nothing internal leaks: no host, port or driver message.
      expect(problem.detail).not.toMatch(/ECONNREFUSED|CONNECTION|127\.0\.0\.1|\d{4,5}/);
    }
    const health = await callApi({ path: "/health" });
    expect(health.status).toBe(503);
    expect(Number(health.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(healthResponse.parse(health.json).checks.database).toMatchObject({ status: "down", code: "unreachable" });
    // GET /faucet reads the database for its snapshot: 503 too. The OpenAPI document is built in memory: it is
    // served through the outage (and lists no 503, lib/openapi.test.ts).
    const faucet = await callApi({ path: "/faucet" });
    expectProblem(faucet, 503, "unavailable");
    expect(Number(faucet.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await callApi({ path: "/openapi.json" })).status).toBe(200);

    await relay.restore();
    const deadline = Date.now() + 20_000;
    let again = await callApi({ path: `/sponsorship/${request.id}` });
    while (again.status !== 200 && Date.now() < deadline) again = await callApi({ path: `/sponsorship/${request.id}` });
    expect(again.status).toBe(200);
  });
});

describe("a database that stops answering (a partition: nothing passes, no reset comes)", () => {
  it("answers 503 unavailable once the answer timeout has passed, never waits on, and recovers when the network is back", async () => {
    // The web pool's limits, with the answer timeout and the connect timeout shortened for the test (15 s and 5 s).
    const viaRelay = new URL(t.url);
    viaRelay.port = String(relay.port);
    const silent = createDatabase(viaRelay.toString(), {
      max: 2,
      applicationName: "sponsorship-web",
      ...WEB_POOL_LIMITS,
      answerTimeoutMs: 1_000,
      connectTimeoutSeconds: 1,
    });
    const config = parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", DATABASE_URL: viaRelay.toString() });
    try {
      // Set up on the usual pool (a slow commit on a busy machine must not trip the short timeout).
      const wallet = randomAddress();
      expect((await callApi({ path: "/wallets/register", body: { walletAddress: wallet } })).status).toBe(201);
      const created = await callApi({ path: "/sponsorship/request", body: { walletAddress: wallet }, ip: "198.51.100.78" });
      const request = sponsorshipRequestResponse.parse(created.json);

      // Both of the pool's connections open and idle, as on a server that has been serving.
      await Promise.all([silent.$client`SELECT 1`, silent.$client`SELECT 1`]);
      setAppContextForTests({ db: silent, config });
      relay.blackhole();
      // Before the answer timeout these waited for TCP to give up (about 15 minutes); the first ones reach the open
      // connections (ANSWER_TIMEOUT), the next ones new connections that never get an answer (CONNECT_TIMEOUT).
      for (const call of [
        { path: `/sponsorship/${request.id}` },
        { path: "/wallets/register", body: { walletAddress: randomAddress() } },
        { path: "/sponsorship/request", body: { walletAddress: randomAddress() } },
        { path: `/wallets/${wallet}/history` },
      ]) {
        const answer = await callApi(call);
        expectProblem(answer, 503, "unavailable");
        expect(Number(answer.headers.get("retry-after")), call.path).toBeGreaterThanOrEqual(1);
      }
      const health = await callApi({ path: "/health" });
      expect(health.status).toBe(503);
      expect(healthResponse.parse(health.json).checks.database).toMatchObject({ status: "down", code: "timeout" });

      await relay.cut();
      await relay.restore();
      const deadline = Date.now() + 20_000;
      let again = await callApi({ path: `/sponsorship/${request.id}` });
      while (again.status !== 200 && Date.now() < deadline) again = await callApi({ path: `/sponsorship/${request.id}` });
      expect(again.status).toBe(200);
    } finally {
      setAppContextForTests({ db, config }); // as beforeAll set it
      await relay.cut();
      await relay.restore();
      await closeDatabase(silent);
    }
  }, 60_000);
});

describe("the web pool's limits", () => {
  it("sets statement_timeout 5 s, lock_timeout 2 s and idle_in_transaction_session_timeout 10 s on its sessions", async () => {
    const rows = await db.$client<{ s: string; l: string; i: string }[]>`SELECT current_setting('statement_timeout') AS s,
      current_setting('lock_timeout') AS l, current_setting('idle_in_transaction_session_timeout') AS i`;
    expect(rows[0]).toEqual({ s: "5s", l: "2s", i: "10s" });
  });

  it("answers a statement cancelled for time (statement_timeout) with 503 unavailable, not 500", async () => {
    const quick = createDatabase(t.url, { max: 1, statementTimeoutMs: 50 });
    try {
      const error = await quick.$client`SELECT pg_sleep(2)`.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((error as { code?: string }).code).toBe("57014");
      const response = unavailableResponse(error, "req-1", { method: "GET", url: "http://x/wallets/0x" });
      expect(response?.status).toBe(503);
      expect(response?.headers.get("retry-after")).toBe("5");
      expect(unavailableResponse(new Error("a bug"), "req-2", { method: "GET", url: "http://x/" })).toBeUndefined();
    } finally {
      await closeDatabase(quick);
    }
  });
});
