import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import type { Anvil } from "@/contracts/anvil";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { startTestChain } from "@/test/chain";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { post, spawnInstance, stopInstance, waitUntilServing, type Instance } from "@/test/instances";
import { freePort } from "@/test/ports";
import { sponsoredTopic } from "@/bench/ceiling";
import { rpc } from "@/bench/rpc";
import { randomAddress, waitFor } from "@/bench/util";

/**
 * Scale-out (issue 6): two web servers (`server.ts`, as `npm start` runs it) and two workers against one
 * PostgreSQL and one chain. The abuse limits are counted in the database, so they hold whichever instance a
 * client reaches; the queue is claimed with row locks, so no request is relayed twice.
 */

describe("two web servers and two workers on one PostgreSQL", () => {
  let testDb: TestDatabase;
  let chain: Anvil;
  let dataDir: string;
  let env: NodeJS.ProcessEnv;
  let treasury: `0x${string}`;
  const webs: Instance[] = [];
  const workers: Instance[] = [];
  const urls: string[] = [];

  beforeAll(async () => {
    // server.ts serves the production build: make sure it matches the sources (a no-op when it does).
    await buildIfStale(createLogger({ component: "scale-out-test" }));
    [testDb, chain, dataDir] = await Promise.all([
      createTestDatabase(),
      startTestChain({ blockTime: 0 }),
      mkdtemp(path.join(tmpdir(), "sponsorship-scale-out-")),
    ]);
    const deployment = await deployContracts({
      rpcUrl: chain.rpcUrl,
      deployerKey: LOCAL_DEPLOYER_KEY,
      relayers: LOCAL_RELAYER_KEYS.map(addressOfKey),
      sponsorAmountWei: 10n ** 16n,
      fundWei: 10n ** 20n,
    });
    treasury = deployment.treasuryAddress;
    env = {
      ...process.env,
      NODE_ENV: "production",
      NEXT_TELEMETRY_DISABLED: "1",
      LOG_LEVEL: "warn",
      DATA_DIR: dataDir,
      DATABASE_URL: testDb.url,
      RPC_URL: chain.rpcUrl,
      CHAIN_ID: String(deployment.chainId),
      REGISTRY_ADDRESS: deployment.registryAddress,
      TREASURY_ADDRESS: deployment.treasuryAddress,
      RELAYER_PRIVATE_KEYS: LOCAL_RELAYER_KEYS.join(","),
      ADMIN_TOKEN: "scale-out-test-admin-token-0123456789",
      TRUST_PROXY: "1",
      RATE_LIMIT_IP_PER_HOUR: "10",
      RATE_LIMIT_WALLET_PER_HOUR: "5",
      WORKER_INTERVAL_MS: "200",
    };
    delete env.METRICS_PORT;
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      webs.push(spawnInstance("server.ts", { ...env, PORT: String(port) }, path.join(dataDir, `web-${i}.log`)));
      urls.push(`http://127.0.0.1:${port}`);
    }
    await Promise.all(urls.map((url, i) => waitUntilServing(url, webs[i]!)));
  }, 15 * 60_000);

  afterAll(async () => {
    await Promise.all([...webs, ...workers].map(stopInstance));
    await Promise.all([testDb?.drop(), chain?.stop()]);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  async function registered(n: number): Promise<`0x${string}`[]> {
    const wallets = Array.from({ length: n }, () => randomAddress());
    for (const [i, w] of wallets.entries()) {
      const res = await post(urls[i % 2]!, "/wallets/register", { walletAddress: w }, `10.200.0.${i + 1}`);
      expect(res.status).toBe(201);
    }
    return wallets;
  }

  it("counts an IP's requests on both instances together: the 11th is refused whichever instance it reaches", async () => {
    const wallets = await registered(12);
    const ip = "10.1.1.1";
    for (let i = 0; i < 10; i++) {
      const res = await post(urls[i % 2]!, "/sponsorship/request", { walletAddress: wallets[i] }, ip);
      expect(res.status, `request ${i + 1} on instance ${i % 2}`).toBe(201);
    }
    const eleventh = await post(urls[1]!, "/sponsorship/request", { walletAddress: wallets[10] }, ip);
    expect(eleventh.status).toBe(429);
    expect(Number(eleventh.retryAfter)).toBeGreaterThanOrEqual(1);
    // The automatic block is in the database too: the other instance refuses the IP as well.
    expect((await post(urls[0]!, "/sponsorship/request", { walletAddress: wallets[11] }, ip)).status).toBe(429);
    // Another client is served.
    expect((await post(urls[0]!, "/sponsorship/request", { walletAddress: wallets[11] }, "10.1.1.2")).status).toBe(201);
  });

  it("counts a wallet's requests on both instances together: the 6th is refused whichever instance it reaches", async () => {
    const [wallet] = await registered(1);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await post(urls[i % 2]!, "/sponsorship/request", { walletAddress: wallet }, `10.2.0.${i + 1}`)).status);
    // One created, then refused while it is open (refusals count against the limit too).
    expect(statuses).toEqual([201, 409, 409, 409, 409]);
    const sixth = await post(urls[1]!, "/sponsorship/request", { walletAddress: wallet }, "10.2.0.6");
    expect(sixth.status).toBe(429);
  });

  it("relays every request exactly once with two workers taking from one queue", { timeout: 240_000 }, async () => {
    for (let i = 0; i < 2; i++) workers.push(spawnInstance(path.join("worker", "index.ts"), env, path.join(dataDir, `worker-${i}.log`)));
    const sql = testDb.db.$client;
    // Both workers up, each holding its share of the four relayer accounts, before any request arrives.
    await waitFor(
      "two workers each leasing relayers",
      async () => {
        const [r] = await sql<{ owners: number }[]>`
          SELECT count(DISTINCT lease_owner)::int AS owners FROM relayer_accounts WHERE lease_expires_at > now()`;
        return r?.owners === 2 ? true : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 200 },
    );
    const wallets = await registered(40);
    const ids: string[] = [];
    await Promise.all(
      wallets.map(async (w, i) => {
        const res = await post(urls[i % 2]!, "/sponsorship/request", { walletAddress: w }, `10.3.${i >> 8}.${(i & 255) + 1}`);
        expect(res.status).toBe(201);
        ids.push(res.body.id as string);
      }),
    );
    await waitFor(
      "every request to finish",
      async () => {
        const [r] = await sql<{ open: number }[]>`SELECT count(*)::int AS open FROM sponsorship_requests WHERE status IN ('pending', 'approved', 'relayed')`;
        return r?.open === 0 ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 200 },
    );

    const rows = await sql<{ id: string; status: string; confirmed: number; hashes: number }[]>`
      SELECT r.id, r.status,
        count(t.id) FILTER (WHERE t.status = 'confirmed')::int AS confirmed,
        count(DISTINCT t.transaction_hash)::int AS hashes
      FROM sponsorship_requests r LEFT JOIN relay_transactions t ON t.sponsorship_request_id = r.id
      WHERE r.id = ANY(${ids}::uuid[]) GROUP BY r.id, r.status`;
    expect(rows).toHaveLength(40);
    for (const r of rows) {
      expect(r.status, r.id).toBe("completed");
      expect(r.confirmed, r.id).toBe(1);
    }
    // The audit trail: each request moved through each status once.
    const transitions = await sql<{ to_status: string; n: number }[]>`
      SELECT to_status, count(*)::int AS n FROM request_events WHERE sponsorship_request_id = ANY(${ids}::uuid[]) GROUP BY to_status`;
    expect(Object.fromEntries(transitions.map((t) => [t.to_status, t.n]))).toEqual({ pending: 40, approved: 40, relayed: 40, completed: 40 });

    // The chain's word: one Sponsored event per wallet, none twice.
    const logs = await rpc<{ topics: string[] }[]>(chain.rpcUrl, "eth_getLogs", [
      { address: treasury, fromBlock: "0x0", toBlock: "latest", topics: [sponsoredTopic()] },
    ]);
    const ours = new Set(wallets.map((w) => w.toLowerCase()));
    const paid = logs.map((l) => `0x${(l.topics[1] ?? "").slice(26)}`.toLowerCase()).filter((w) => ours.has(w));
    expect(paid).toHaveLength(40);
    expect(new Set(paid).size).toBe(40);
    // Each relayer nonce used once: no transaction was sent twice under two workers.
    const [dup] = await sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM (
        SELECT relayer_address, nonce FROM relay_transactions WHERE status = 'confirmed' GROUP BY 1, 2 HAVING count(*) > 1
      ) d`;
    expect(dup?.n).toBe(0);
  });
});
