import { randomBytes } from "node:crypto";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { deployContracts } from "@/contracts/deploy-lib";
import { relayerAccounts, workerHeartbeats } from "@/db/schema";
import { createChainClients } from "@/lib/chain/clients";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { freePort } from "@/test/ports";
import { loadDashboardOverview } from "./overview";

let t: TestDatabase;
let anvil: Anvil;
const AMOUNT = 10n ** 16n;

beforeAll(async () => {
  [t, anvil] = await Promise.all([createTestDatabase(), startTestChain()]);
});
afterAll(async () => {
  await Promise.all([t?.drop(), anvil?.stop()]);
});

describe("dashboard overview", () => {
  it("shows the treasury balance, how many sponsorships it still covers, and each relayer's balance and nonce, relayers read from the database without any key", async () => {
    const relayers = LOCAL_RELAYER_KEYS.slice(0, 2).map((k) => privateKeyToAccount(k).address.toLowerCase() as `0x${string}`);
    const deployed = await deployContracts({
      rpcUrl: anvil.rpcUrl,
      deployerKey: LOCAL_DEPLOYER_KEY,
      relayers,
      sponsorAmountWei: AMOUNT,
      fundWei: 25n * AMOUNT + 1n,
    });
    // The worker registered both relayers (the web server reads them from here; it holds no key).
    await t.db.insert(relayerAccounts).values(relayers.map((address) => ({ address, chainId: deployed.chainId, nextNonce: 0 })));
    await t.db.insert(workerHeartbeats).values([
      { workerId: "fresh", hostname: "h", pid: 1, lastBeatAt: new Date() },
      { workerId: "stale", hostname: "h", pid: 2, lastBeatAt: new Date(Date.now() - 120_000) },
    ]);

    const client = createChainClients({ rpcUrl: anvil.rpcUrl, chainId: deployed.chainId });
    const overview = await loadDashboardOverview(t.db, {
      chain: { client, treasuryAddress: deployed.treasuryAddress },
      heartbeatStaleMs: 15_000,
    });

    expect(overview.treasury).toMatchObject({ kind: "ok", balance: 25n * AMOUNT + 1n, amount: AMOUNT, covers: 25n, paused: false });
    expect(overview.relayers.map((r) => r.address)).toEqual([...relayers].sort());
    for (const r of overview.relayers) {
      expect(r.balance).toBeGreaterThan(0n);
      expect(r.chainNonce).toBe(0);
      expect(r.pendingNonce).toBe(0);
    }
    expect(overview.relayers.find((r) => r.address === relayers[0])?.nextNonce).toBe(0);
    expect(overview.heartbeats.map((h) => [h.workerId, h.healthy])).toEqual([
      ["fresh", true],
      ["stale", false],
    ]);
    expect(overview.series.buckets).toHaveLength(24);
    expect(overview.relayersError).toBeNull();

    // The ages are the database's: this server's wall clock an hour ahead (a step, or a skew) changes none of them.
    // Before, "fresh" was shown stale.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() + 3_600_000 });
    try {
      const later = await loadDashboardOverview(t.db, { chain: { client, treasuryAddress: deployed.treasuryAddress }, heartbeatStaleMs: 15_000 });
      expect(later.heartbeats.map((h) => [h.workerId, h.healthy])).toEqual([
        ["fresh", true],
        ["stale", false],
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("still renders the database panels when the chain does not answer", async () => {
    // A port nobody listens on: the reads fail fast, the panels say why.
    const client = createChainClients({ rpcUrl: `http://127.0.0.1:${await freePort()}`, retryCount: 0, timeoutMs: 1000 });
    const treasury = `0x${randomBytes(20).toString("hex")}` as `0x${string}`;
    const overview = await loadDashboardOverview(t.db, {
      chain: { client, treasuryAddress: treasury },
      heartbeatStaleMs: 15_000,
      chainTimeoutMs: 2000,
    });
    expect(overview.treasury.kind).toBe("unavailable");
    expect(overview.relayersError).toEqual(expect.any(String));
    expect(overview.statusCounts.pending).toBe(0);
  });

  it("says when no chain is configured", async () => {
    const overview = await loadDashboardOverview(t.db, { chain: null, heartbeatStaleMs: 15_000, range: "1h" });
    expect(overview.treasury).toEqual({ kind: "not_configured" });
    expect(overview.series.buckets).toHaveLength(30);
  });
});
