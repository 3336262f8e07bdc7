import { sql } from "drizzle-orm";
import { toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { waitFor } from "@/bench/util";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import type { Anvil } from "@/contracts/anvil";
import { createDatabase, closeDatabase } from "@/db/client";
import { workerHeartbeats } from "@/db/schema";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS, parseConfig } from "@/lib/config";
import { callApi, setupApiTestContext } from "@/test/api-client";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { chainRpc, startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { CHAIN_CACHE_MS, checkHealth } from "./health";

const ctx = setupApiTestContext();
let chain: Anvil;
let funded: `0x${string}`;
let unfunded: `0x${string}`;
let registry: `0x${string}`;

beforeAll(async () => {
  chain = await startTestChain();
  const common = { rpcUrl: chain.rpcUrl, deployerKey: LOCAL_DEPLOYER_KEY, relayers: [addressOfKey(LOCAL_RELAYER_KEYS[0]!)], sponsorAmountWei: 10n ** 16n };
  const a = await deployContracts({ ...common, fundWei: 10n ** 18n });
  const b = await deployContracts({ ...common, fundWei: 0n });
  funded = a.treasuryAddress;
  registry = a.registryAddress;
  unfunded = b.treasuryAddress;
}, 120_000);
afterAll(async () => chain?.stop());

const config = (env: Record<string, string> = {}) =>
  parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", DATABASE_URL: ctx.t.url, WORKER_INTERVAL_MS: "1000", ...env });

async function beat(workerId: string, ageMs: number) {
  const lastBeatAt = new Date(Date.now() - ageMs);
  await ctx.t.db
    .insert(workerHeartbeats)
    .values({ workerId, hostname: "test", pid: 1, lastBeatAt })
    .onConflictDoUpdate({ target: workerHeartbeats.workerId, set: { lastBeatAt } });
}

describe("GET /health", () => {
  it("answers 200 with status, uptime and the four checks, every field typed", async () => {
    const answer = await callApi({ path: "/health" });
    expect(answer.status).toBe(200);
    const health = healthResponse.parse(answer.json);
    expect(Number.isInteger(health.uptime)).toBe(true);
    expect(health.checks.database.status).toBe("ok");
    expect(health.checks.chain.status).toBe("not_configured");
    expect(health.checks.treasury.status).toBe("not_configured");
  });

  it("is degraded while no worker has a recent heartbeat, ok once one has", async () => {
    await ctx.t.db.delete(workerHeartbeats);
    const none = await checkHealth({ db: ctx.t.db, config: config() });
    expect(none.body.status).toBe("degraded");
    expect(none.body.checks.worker.status).toBe("down");
    await beat("stale", 60_000); // 15 s is the floor of the staleness limit
    expect((await checkHealth({ db: ctx.t.db, config: config() })).body.checks.worker).toMatchObject({ status: "down" });
    await beat("fresh", 500);
    const ok = await checkHealth({ db: ctx.t.db, config: config() });
    expect(ok.httpStatus).toBe(200);
    expect(ok.body.status).toBe("ok");
    expect(ok.body.checks.worker.status).toBe("ok");
  });

  it("judges the worker's heartbeat by the database's clock: a step of this server's wall clock changes nothing", async () => {
    await ctx.t.db.delete(workerHeartbeats);
    await beat("w", 0);
    const worker = async () => (await checkHealth({ db: ctx.t.db, config: config() })).body.checks.worker;
    try {
      // Before, the age was this server's Date.now() against the stored beat: an hour ahead, a live worker was
      // "heartbeat_stale"; an hour behind, a dead one was "ok" (its age clamped to 0) for the hour.
      vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() + 3_600_000 });
      expect(await worker()).toMatchObject({ status: "ok" });
      vi.setSystemTime(Date.now() - 2 * 3_600_000);
      await ctx.t.db.execute(sql`UPDATE worker_heartbeats SET last_beat_at = now() - interval '60 seconds'`);
      expect(await worker()).toMatchObject({ status: "down", code: "heartbeat_stale" });
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports the chain and a funded treasury as ok", async () => {
    await beat("fresh", 0);
    const report = await checkHealth({ db: ctx.t.db, config: config({ RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded }) });
    healthResponse.parse(report.body);
    expect(report.body.status).toBe("ok");
    expect(report.body.checks.chain).toMatchObject({ status: "ok", chainId: 31337 });
    expect(report.body.checks.treasury).toMatchObject({
      status: "ok",
      balanceWei: (10n ** 18n).toString(),
      requiredWei: (10n ** 16n).toString(),
      paused: false,
    });
  });

  it("judges the treasury by the amount it pays (its own amount(), as the worker does), not this process's SPONSOR_AMOUNT_WEI", async () => {
    await beat("fresh", 0);
    // The deployed treasury pays 0.01 and holds 1; a process configured with 10 per sponsorship (the owner lowered the
    // amount on-chain since) must not call it underfunded while the worker relays from it. Before: degraded, 10 required.
    const env = { RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded, SPONSOR_AMOUNT_WEI: (10n ** 19n).toString() };
    const report = await checkHealth({ db: ctx.t.db, config: config(env) });
    expect(report.body.checks.treasury).toMatchObject({ status: "ok", balanceWei: (10n ** 18n).toString(), requiredWei: (10n ** 16n).toString() });
  });

  it("is degraded (still 200) when the treasury holds less than one sponsorship", async () => {
    await beat("fresh", 0);
    const report = await checkHealth({ db: ctx.t.db, config: config({ RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: unfunded }) });
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.treasury).toMatchObject({ status: "degraded", balanceWei: "0" });
  });

  it("reads the chain again once its cache has aged, also after the wall clock stepped back", async () => {
    await beat("fresh", 0);
    const env = { RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded };
    const treasury = async () => (await checkHealth({ db: ctx.t.db, config: config(env) })).body.checks.treasury;
    expect(await treasury()).toMatchObject({ status: "ok" });
    // NTP correcting a clock that ran fast, a VM restored from a snapshot: Date steps back an hour (timers and
    // performance.now() do not, as with a real step). Before, the cache's expiry was on the wall clock: the treasury
    // drained after the step stayed "ok" for the hour.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [funded, "0x0"]);
      const seen = await waitFor("/health to see the drained treasury", async () => ((await treasury()).status === "degraded" ? true : undefined), {
        timeoutMs: 5 * CHAIN_CACHE_MS,
      });
      expect(seen).toBe(true);
    } finally {
      vi.useRealTimers();
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [funded, toHex(10n ** 18n)]);
    }
  });

  it("is degraded when the chain cannot be reached", async () => {
    await beat("fresh", 0);
    const report = await checkHealth({
      db: ctx.t.db,
      config: config({ RPC_URL: `http://127.0.0.1:${await freePort()}`, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded }),
    });
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.chain).toMatchObject({ status: "down", code: "unreachable" });
    expect(report.body.checks.treasury).toMatchObject({ status: "down", code: "chain_down" });
    // No host, port or error text reaches the answer (issue 11, item 6).
    expect(JSON.stringify(report.body)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|fetch failed|HTTP request failed/i);
  });

  it("says endpoints_other_chain, not unreachable, when the one endpoint serves another chain than CHAIN_ID's", async () => {
    await beat("fresh", 0);
    const report = await checkHealth({
      db: ctx.t.db,
      config: config({ RPC_URL: chain.rpcUrl, CHAIN_ID: "8453", REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded }),
    });
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.chain).toMatchObject({ status: "down", code: "endpoints_other_chain" });
    expect(report.body.checks.chain.endpoints).toEqual([expect.objectContaining({ index: 1, status: "other_chain", chainId: 31337 })]);
    expect(healthResponse.safeParse(report.body).success).toBe(true);
  });

  it("answers 503 unavailable when the database does not answer", async () => {
    const dead = createDatabase(`postgres://postgres:postgres@127.0.0.1:${await freePort()}/none`, { max: 1 });
    try {
      const report = await checkHealth({ db: dead, config: config() });
      expect(report.httpStatus).toBe(503);
      expect(healthResponse.parse(report.body)).toMatchObject({ status: "unavailable", checks: { database: { status: "down", code: "unreachable" } } });
      expect(JSON.stringify(report.body)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|CONNECT|none/);
    } finally {
      await closeDatabase(dead).catch(() => {});
    }
  });

  it("says auth_failed when the database refuses the credentials, without the server's message or the user name", async () => {
    const url = new URL(ctx.t.url);
    url.username = "intruder_h1";
    url.password = "wrong-password";
    const refused = createDatabase(url.toString(), { max: 1 });
    try {
      const report = await checkHealth({ db: refused, config: config() });
      expect(report.httpStatus).toBe(503);
      expect(report.body.checks.database).toEqual({ status: "down", code: "auth_failed", detail: "the database refused the service's credentials" });
      expect(JSON.stringify(report.body)).not.toMatch(/intruder_h1|password authentication|does not exist/);
    } finally {
      await closeDatabase(refused).catch(() => {});
    }
  });

  it("says timeout when the RPC endpoint accepts the connection but never answers", async () => {
    const { createServer } = await import("node:net");
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", () => resolve()));
    const port = (silent.address() as { port: number }).port;
    try {
      await beat("fresh", 0);
      const report = await checkHealth({
        db: ctx.t.db,
        config: config({ RPC_URL: `http://127.0.0.1:${port}`, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: funded }),
      });
      expect(report.body.checks.chain).toMatchObject({ status: "down", code: "timeout" });
      expect(JSON.stringify(report.body)).not.toContain(String(port));
    } finally {
      silent.close();
    }
  });
});
