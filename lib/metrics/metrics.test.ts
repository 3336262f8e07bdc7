import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Registry } from "prom-client";
import { toHex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { waitFor } from "@/bench/util";
import { createDatabase, closeDatabase } from "@/db/client";
import { setPaused } from "@/db/queries/controls";
import { relayerAccounts, sponsorshipRequests, wallets, workerHeartbeats } from "@/db/schema";
import { LOCAL_DEV_KEYS } from "@/lib/config";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { chainRpc, startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { startSilentRpcProxy } from "@/test/rpc-proxy";
import type { Anvil } from "@/contracts/anvil";
import { createViemChainReader } from "./chain-reader";
import { serveMetricsRequest, startMetricsServer } from "./expose";
import { createHttpMetrics, instrumentHttpExchange, routeLabel } from "./http";
import { createPipelineMetrics } from "./pipeline";
import { createMetricsRegistry } from "./registry";
import { registerServiceMetrics } from "./service";

type Sample = { labels: Record<string, string | number>; value: number; metricName?: string };

async function samples(registry: Registry, name: string): Promise<Sample[]> {
  const all = await registry.getMetricsAsJSON();
  const metric = all.find((m) => m.name === name);
  return (metric?.values ?? []) as Sample[];
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const found = (await samples(registry, name)).find((s) => Object.entries(labels).every(([k, v]) => String(s.labels[k]) === v));
  return found?.value;
}

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; type?: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, type: res.headers["content-type"] }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("route labels", () => {
  it("maps every path of the interface to its template, so ids, addresses and hashes never become labels", () => {
    const address = "0x" + "ab".repeat(20);
    expect(routeLabel("/health")).toBe("/health");
    expect(routeLabel("/wallets/register")).toBe("/wallets/register");
    expect(routeLabel(`/wallets/${address}`)).toBe("/wallets/:address");
    expect(routeLabel(`/wallets/${address}/history?limit=10`)).toBe("/wallets/:address/history");
    expect(routeLabel("/sponsorship/request")).toBe("/sponsorship/request");
    expect(routeLabel("/sponsorship/3f0c1f9e-8a6b-4c1d-9e2f-0a1b2c3d4e5f")).toBe("/sponsorship/:id");
    expect(routeLabel("/sponsorship/not-a-uuid")).toBe("/sponsorship/:id");
    expect(routeLabel("/sponsorship/tx/0x" + "1".repeat(64))).toBe("/sponsorship/tx/:hash");
    expect(routeLabel("/relay/3f0c1f9e-8a6b-4c1d-9e2f-0a1b2c3d4e5f")).toBe("/relay/:id");
    expect(routeLabel("/dashboard/requests/abc")).toBe("/dashboard");
    expect(routeLabel("/_next/static/chunks/x.js")).toBe("/_next");
    expect(routeLabel("/faucet")).toBe("/faucet");
    expect(routeLabel("/wp-login.php")).toBe("other");
  });
});

describe("HTTP metrics", () => {
  let server: Server;
  let base: string;
  const registry = createMetricsRegistry("web", { defaultMetrics: false });
  const metrics = createHttpMetrics(registry);

  beforeAll(async () => {
    server = createServer((req, res) => {
      instrumentHttpExchange(metrics, req, res);
      if (req.url?.startsWith("/sponsorship/")) res.writeHead(404).end("{}");
      else res.writeHead(200).end("{}");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("counts requests by route template, method and status, with a latency histogram", async () => {
    await get(`${base}/health`);
    await get(`${base}/health`);
    await get(`${base}/sponsorship/3f0c1f9e-8a6b-4c1d-9e2f-0a1b2c3d4e5f`);
    expect(await value(registry, "http_requests_total", { route: "/health", method: "GET", status: "200" })).toBe(2);
    expect(await value(registry, "http_requests_total", { route: "/sponsorship/:id", status: "404" })).toBe(1);
    const counts = (await samples(registry, "http_request_duration_seconds")).filter(
      (s) => s.metricName === "http_request_duration_seconds_count" && s.labels.route === "/health",
    );
    expect(counts.map((s) => s.value)).toEqual([2]);
    const text = await registry.metrics();
    expect(text).toContain('component="web"');
    expect(text).not.toContain("3f0c1f9e");
  });

  it("counts problem answers by code (the web server counts every rendered problem: server.test.ts)", async () => {
    metrics.problem("sponsorships_paused");
    metrics.problem("sponsorships_paused");
    metrics.problem("unavailable");
    expect(await value(registry, "http_problems_total", { code: "sponsorships_paused" })).toBe(2);
    expect(await value(registry, "http_problems_total", { code: "unavailable" })).toBe(1);
  });
});

describe("pipeline metrics", () => {
  it("derives the time spent in each stage from a finished request's timestamps", async () => {
    const registry = createMetricsRegistry("worker", { defaultMetrics: false });
    const pipeline = createPipelineMetrics(registry);
    const t = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);
    pipeline.observeRequestFinished({
      status: "completed",
      requestedAt: t(0),
      approvedAt: t(200),
      relayedAt: t(500),
      completedAt: t(1500),
    });
    pipeline.observeRequestFinished({ status: "rejected", requestedAt: t(0), rejectedAt: t(100) });
    pipeline.observeRequestFinished({ status: "pending", requestedAt: t(0) });
    const sums = Object.fromEntries(
      (await samples(registry, "sponsorship_stage_duration_seconds"))
        .filter((s) => s.metricName === "sponsorship_stage_duration_seconds_sum")
        .map((s) => [s.labels.stage, s.value]),
    );
    expect(sums).toEqual({ review: 0.30000000000000004, queue: 0.3, confirm: 1, total: 1.5 });
    expect(await value(registry, "sponsorship_requests_finished_total", { status: "completed" })).toBe(1);
    expect(await value(registry, "sponsorship_requests_finished_total", { status: "rejected" })).toBe(1);
  });

  it("counts relay attempts, failures by kind and confirmations per relayer", async () => {
    const registry = createMetricsRegistry("worker", { defaultMetrics: false });
    const pipeline = createPipelineMetrics(registry);
    pipeline.recordRelayAttempt({ relayer: "0xAA", attempt: 1 });
    pipeline.recordRelayAttempt({ relayer: "0xaa", attempt: 2 });
    pipeline.recordRelayFailure({ relayer: "0xaa", kind: "timeout" });
    pipeline.recordRelayConfirmed({ relayer: "0xaa" });
    const attempts = (await samples(registry, "sponsorship_relay_attempts_total")).reduce((n, s) => n + s.value, 0);
    expect(attempts).toBe(2);
    expect(await value(registry, "sponsorship_relay_failures_total", { relayer: "0xaa", kind: "timeout" })).toBe(1);
    expect(await value(registry, "sponsorship_relay_confirmed_total", { relayer: "0xaa" })).toBe(1);
  });

  it("exports no fee ceiling, base fee or above-ceiling sample before the worker has read its fees with a ceiling", async () => {
    // Before: a new unlabeled gauge reads 0, so `sponsorship_fee_ceiling_wei 0` said there was a ceiling of 0 wei.
    const registry = createMetricsRegistry("worker", { defaultMetrics: false });
    createPipelineMetrics(registry);
    const text = await registry.metrics();
    for (const name of ["sponsorship_fee_ceiling_wei", "sponsorship_base_fee_wei", "sponsorship_fees_above_ceiling"]) {
      expect(text).not.toMatch(new RegExp(`^${name}[ {]`, "m"));
    }
  });
});

describe("service-wide metrics from the database and the chain", () => {
  let testDb: TestDatabase;
  let chain: Anvil;
  const relayer = privateKeyToAccount(LOCAL_DEV_KEYS[1]).address.toLowerCase() as `0x${string}`;
  // Any funded account stands in for the treasury: the balance is what is read.
  const treasury = privateKeyToAccount(LOCAL_DEV_KEYS[2]).address;

  beforeAll(async () => {
    [testDb, chain] = await Promise.all([createTestDatabase(), startTestChain()]);
    const db = testDb.db;
    const ws = await db
      .insert(wallets)
      .values(["01", "02", "03"].map((n) => ({ walletAddress: `0x${n.repeat(20)}` })))
      .returning();
    const now = Date.now();
    await db.insert(sponsorshipRequests).values([
      { walletId: ws[0]!.id, walletAddress: ws[0]!.walletAddress, ipAddress: "1.1.1.1", requestedAt: new Date(now - 30_000) },
      { walletId: ws[1]!.id, walletAddress: ws[1]!.walletAddress, ipAddress: "1.1.1.1", requestedAt: new Date(now - 5_000) },
      {
        walletId: ws[2]!.id,
        walletAddress: ws[2]!.walletAddress,
        ipAddress: "1.1.1.1",
        status: "rejected",
        rejectedAt: new Date(now),
        eligibilityReason: "wallet_blocked",
      },
    ]);
    await db.insert(workerHeartbeats).values({ workerId: "w1", hostname: "h", pid: 1, lastBeatAt: new Date(now - 12_000) });
    await db.insert(relayerAccounts).values({ address: relayer, chainId: 31337, nextNonce: 5 });
  });
  afterAll(async () => {
    await Promise.all([testDb?.drop(), chain?.stop()]);
  });

  it("reports requests per status, queue age, heartbeat age, nonce lag and balances on each scrape", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    const reader = createViemChainReader(chain.rpcUrl);
    registerServiceMetrics(registry, {
      sources: () => ({ db: testDb.db, chain: reader, treasuryAddress: treasury, sponsorAmountWei: 10n ** 16n, treasuryLowSponsorships: 250 }),
      cacheMs: 0,
    });
    expect(await value(registry, "sponsorship_requests", { status: "pending" })).toBe(2);
    expect(await value(registry, "sponsorship_requests", { status: "rejected" })).toBe(1);
    expect(await value(registry, "sponsorship_requests", { status: "completed" })).toBe(0);
    expect(await value(registry, "sponsorship_queue_oldest_seconds", { status: "pending" })).toBeGreaterThanOrEqual(29);
    expect(await value(registry, "sponsorship_worker_heartbeat_age_seconds", { worker: "w1" })).toBeGreaterThanOrEqual(11);
    // The database has handed out nonces 0..4; the chain has mined none of them.
    expect(await value(registry, "sponsorship_relayer_nonce_lag", { relayer })).toBe(5);
    const funded = Number(await reader.getBalance(treasury));
    expect(funded).toBeGreaterThan(0);
    expect(await value(registry, "sponsorship_treasury_balance_wei")).toBe(funded);
    // Not a treasury contract: amount() fails and the configured amount is used.
    expect(await value(registry, "sponsorship_treasury_sponsorships_left")).toBe(Math.floor(funded / 1e16));
    // TREASURY_LOW_SPONSORSHIPS, which SponsorshipTreasuryLow compares with (the `treasury.low` webhook's threshold).
    expect(await value(registry, "sponsorship_treasury_low_threshold")).toBe(250);
    expect(await value(registry, "sponsorship_relayer_balance_wei", { relayer })).toBe(Number(await reader.getBalance(relayer)));
  });

  it("exports the administrator's pause as sponsorship_paused (0, 1 while paused, 0 again after resume)", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    registerServiceMetrics(registry, { sources: () => ({ db: testDb.db }), cacheMs: 0 });
    // No service_state row yet: not paused.
    expect(await value(registry, "sponsorship_paused")).toBe(0);
    await setPaused(testDb.db, { paused: true, reason: "maintenance", actor: "test", now: new Date() });
    try {
      expect(await value(registry, "sponsorship_paused")).toBe(1);
    } finally {
      await setPaused(testDb.db, { paused: false, reason: null, actor: "test", now: new Date() });
    }
    expect(await value(registry, "sponsorship_paused")).toBe(0);
  });

  it("takes a new snapshot once the last has aged, also after the wall clock stepped back", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    const reader = createViemChainReader(chain.rpcUrl);
    registerServiceMetrics(registry, { sources: () => ({ db: testDb.db, chain: reader, treasuryAddress: treasury }), cacheMs: 200 });
    const before = await reader.getBalance(treasury);
    expect(await value(registry, "sponsorship_treasury_balance_wei")).toBe(Number(before));
    // Date steps back an hour (NTP, a restored VM); timers and performance.now() do not, as with a real step.
    // Before, the snapshot's age was taken on the wall clock: every scrape for the hour got the old balance.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [treasury, toHex(12345n)]);
      const seen = await waitFor(
        "a scrape to show the new balance",
        async () => ((await value(registry, "sponsorship_treasury_balance_wei")) === 12345 ? true : undefined),
        { timeoutMs: 5_000 },
      );
      expect(seen).toBe(true);
    } finally {
      vi.useRealTimers();
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [treasury, toHex(before)]);
    }
  });

  it("reads the chain from the next RPC endpoint once the first stops answering: a silent first endpoint cools off", async () => {
    // RPC_URL with a first endpoint that takes connections and never answers, at the defaults (each call's timeout
    // and the scrape's are both 3 s). Asked in a fixed order (viem's fallback, before), every scrape waited for the
    // silent one and went on without the chain's series, for as long as it stayed silent.
    const silent = await startSilentRpcProxy(chain.rpcUrl);
    try {
      const registry = createMetricsRegistry("web", { defaultMetrics: false });
      const reader = createViemChainReader([silent.url, chain.rpcUrl]);
      registerServiceMetrics(registry, { sources: () => ({ db: testDb.db, chain: reader, treasuryAddress: treasury }), cacheMs: 0 });
      const balance = Number(await createViemChainReader(chain.rpcUrl).getBalance(treasury));
      const seen = await waitFor(
        "a scrape with the treasury's balance",
        async () => ((await value(registry, "sponsorship_treasury_balance_wei")) === balance ? true : undefined),
        { timeoutMs: 20_000 },
      );
      expect(seen).toBe(true);
      // And the scrapes after it keep it: the silent endpoint is asked after the other while it cools off.
      expect(await value(registry, "sponsorship_treasury_balance_wei")).toBe(balance);
    } finally {
      await silent.close();
    }
  }, 30_000);

  it("reads the chain only from endpoints that answered its chain id: one of another chain listed first is never read", async () => {
    // A mainnet URL beside the testnet's, say: before, its answers (the treasury's balance there) were the scrape's.
    const other = await startTestChain({ chainId: 1337 });
    try {
      await chainRpc(other.rpcUrl, "anvil_setBalance", [treasury, toHex(777n)]);
      const balance = Number(await createViemChainReader(chain.rpcUrl).getBalance(treasury));
      const registry = createMetricsRegistry("web", { defaultMetrics: false });
      const reader = createViemChainReader([other.rpcUrl, chain.rpcUrl], { chainId: 31337 });
      registerServiceMetrics(registry, { sources: () => ({ db: testDb.db, chain: reader, treasuryAddress: treasury }), cacheMs: 0 });
      for (let i = 0; i < 3; i++) expect(await value(registry, "sponsorship_treasury_balance_wei")).toBe(balance);

      // Every endpoint of another chain: the chain's series are left out, not another chain's shown.
      const wrong = createMetricsRegistry("web", { defaultMetrics: false });
      const only = createViemChainReader([other.rpcUrl, other.rpcUrl], { chainId: 31337 });
      registerServiceMetrics(wrong, { sources: () => ({ db: testDb.db, chain: only, treasuryAddress: treasury }), cacheMs: 0 });
      expect(await value(wrong, "sponsorship_treasury_balance_wei")).toBeUndefined();
      expect(await value(wrong, "sponsorship_metrics_collect_errors_total", { source: "chain" })).toBeGreaterThanOrEqual(1);
    } finally {
      await other.stop();
    }
  });

  it("exports no treasury balance and no sponsorships left while the chain cannot be read (not 0: SponsorshipTreasuryEmpty)", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    const down = createViemChainReader(`http://127.0.0.1:${await freePort()}`, { timeoutMs: 500 });
    registerServiceMetrics(registry, {
      sources: () => ({ db: testDb.db, chain: down, treasuryAddress: treasury, treasuryLowSponsorships: 250 }),
      cacheMs: 0,
      timeoutMs: 1_000,
    });
    const text = await registry.metrics();
    expect(text).not.toMatch(/^sponsorship_treasury_balance_wei[ {]/m);
    expect(text).not.toMatch(/^sponsorship_treasury_sponsorships_left[ {]/m);
    expect(await value(registry, "sponsorship_metrics_collect_errors_total", { source: "chain" })).toBeGreaterThanOrEqual(1);
    expect(await value(registry, "sponsorship_treasury_low_threshold")).toBe(250);
  });

  it("still answers a scrape, without the database's series, when the database cannot be reached", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    const dead = createDatabase(`postgres://postgres:postgres@127.0.0.1:${await freePort()}/none`, { max: 1 });
    try {
      registerServiceMetrics(registry, { sources: () => ({ db: dead }), cacheMs: 0, timeoutMs: 500 });
      const text = await registry.metrics();
      expect(text).toContain("sponsorship_metrics_collect_errors_total");
      expect(await value(registry, "sponsorship_metrics_collect_errors_total", { source: "database" })).toBeGreaterThanOrEqual(1);
      expect(await samples(registry, "sponsorship_requests")).toEqual([]);
      // Not 0 ("not paused"): no sample, as for every series of the database.
      expect(text).not.toMatch(/^sponsorship_paused[ {]/m);
    } finally {
      await closeDatabase(dead).catch(() => {});
    }
  });
});

describe("exposure", () => {
  it("serves the text format on a loopback-only port", async () => {
    const registry = createMetricsRegistry("worker");
    const server = await startMetricsServer(registry, 0);
    try {
      const res = await get(`http://127.0.0.1:${server.port}/metrics`);
      expect(res.status).toBe(200);
      expect(res.type).toContain("text/plain");
      expect(res.body).toContain("process_cpu_user_seconds_total");
      // Not bound on other interfaces: this machine's own non-loopback address (or, without one, IPv6's loopback)
      // refuses the connection. Bound on the wildcard address, it would answer there.
      const other = Object.values(networkInterfaces())
        .flat()
        .find((a) => a && !a.internal && a.family === "IPv4")?.address;
      await expect(get(other ? `http://${other}:${server.port}/metrics` : `http://[::1]:${server.port}/metrics`)).rejects.toMatchObject({
        code: "ECONNREFUSED",
      });
    } finally {
      await server.close();
    }
  });

  it("answers /metrics on the web port only to the administrator's bearer credential", async () => {
    const registry = createMetricsRegistry("web", { defaultMetrics: false });
    createHttpMetrics(registry).observe({ route: "/health", method: "GET", status: 200, seconds: 0.001 });
    const adminToken = "an-administrator-token-of-some-length";
    const server = createServer((req, res) => {
      void serveMetricsRequest(registry, req, res, { adminToken }).then((served) => {
        if (!served) res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect((await get(`${base}/metrics`)).status).toBe(401);
      expect((await get(`${base}/metrics`, { authorization: "Bearer wrong-token-wrong-token" })).status).toBe(401);
      const ok = await get(`${base}/metrics`, { authorization: `Bearer ${adminToken}` });
      expect(ok.status).toBe(200);
      expect(ok.body).toContain("http_requests_total");
      expect((await get(`${base}/health`)).status).toBe(204);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
