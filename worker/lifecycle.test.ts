import { sql } from "drizzle-orm";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workerHeartbeats } from "@/db/schema";
import { LOCAL_DEV_KEYS } from "@/lib/config";
import { startRpcProxy } from "@/test/rpc-proxy";
import {
  createRequest,
  randomWallet,
  readRequest,
  spawnWorker,
  startInProcessWorker,
  stopSpawned,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * The worker as a process the supervisor can rely on (issue 4 items 5 and 6): a graceful SIGTERM gives its
 * relayer leases back and removes its heartbeat, exiting 0; a configuration it cannot work with exits 1 with one
 * readable line; while running it keeps a heartbeat with what /health and the dashboard show.
 */

let fx: PipelineFixture;
const spawned: SpawnedWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 2 }, (started) => (fx = started));

beforeAll(async () => {});

afterAll(async () => {
  for (const w of spawned) await stopSpawned(w);
});

/** The message of the one fatal log line a worker that cannot start writes (fails unless there is exactly one). */
function fatalMessage(w: SpawnedWorker): string {
  const fatal = w
    .output()
    .split("\n")
    .filter((l) => l.includes('"fatal":true'));
  expect(fatal).toHaveLength(1);
  return (JSON.parse(fatal[0]!) as { msg: string }).msg;
}

describe("the worker process", () => {
  it("keeps a heartbeat row with its relayers, queue depths, chain and treasury state", async () => {
    const w = spawnWorker(fx);
    spawned.push(w);
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
    const beat = await waitFor("a heartbeat with the treasury state", async () => {
      const [row] = await fx.database.db.select().from(workerHeartbeats);
      const d = row?.details as { treasury?: unknown; totals?: { completed?: number } } | undefined;
      return d?.treasury && (d.totals?.completed ?? 0) >= 1 ? row : undefined;
    });
    expect(beat!.pid).toBe(w.pid);
    expect(beat!.details).toMatchObject({
      version: 1,
      state: "running",
      relayers: { leased: expect.arrayContaining(fx.relayerKeys.map(() => expect.stringMatching(/^0x[0-9a-f]{40}$/))) },
      queue: { pending: 0, approved: 0, relayed: 0 },
      chain: { reachable: true, chainId: fx.deployment.chainId },
      treasury: { address: fx.deployment.treasuryAddress, paused: false, underfunded: false },
      lastError: null,
    });
    await stopSpawned(w);
  });

  it("prunes, while it runs, the heartbeat rows of workers silent for an hour, and keeps those of live workers", async () => {
    const db = fx.database.db;
    const w = await startInProcessWorker(fx, {}, { heartbeatPruneMs: 300 });
    try {
      // Written after it started (a worker SIGKILLed two hours ago elsewhere); before, rows were pruned only at a
      // worker's start, and the dashboard showed the dead worker until the next one.
      await db.execute(sql`
        INSERT INTO worker_heartbeats (worker_id, hostname, pid, last_beat_at) VALUES
          ('elsewhere:1:gone00', 'elsewhere', 1, now() - interval '2 hours'),
          ('elsewhere:2:quiet0', 'elsewhere', 2, now() - interval '50 minutes'),
          ('elsewhere:3:alive0', 'elsewhere', 3, now())`);
      const ids = async () => (await db.execute<{ id: string }>(sql`SELECT worker_id AS id FROM worker_heartbeats ORDER BY worker_id`)).map((r) => r.id);
      await waitFor("the gone worker's row to be pruned", async () => !(await ids()).includes("elsewhere:1:gone00"), 5_000);
      expect(await ids()).toEqual(["elsewhere:2:quiet0", "elsewhere:3:alive0", w.workerId].sort());
    } finally {
      await w.stop();
      await db.execute(sql`DELETE FROM worker_heartbeats WHERE hostname = 'elsewhere'`);
    }
  });

  it("stops gracefully on SIGTERM: exit 0, leases given back, heartbeat removed", async () => {
    const w = spawnWorker(fx);
    spawned.push(w);
    await waitFor("the worker to hold its leases", async () => {
      const rows = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL`);
      return rows[0]!.n === 2;
    });
    w.process.kill("SIGTERM");
    const exit = await w.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(w.output()).toContain('"msg":"worker stopped"');
    const leased = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM relayer_accounts WHERE lease_owner IS NOT NULL`);
    expect(leased[0]!.n).toBe(0);
    expect(await fx.database.db.select().from(workerHeartbeats)).toEqual([]);
  });

  it("exits 1 with one readable line when the configured treasury has no contract", async () => {
    const w = spawnWorker(fx, { TREASURY_ADDRESS: randomWallet() });
    spawned.push(w);
    const exit = await w.exited;
    expect(exit.code).toBe(1);
    expect(fatalMessage(w)).toMatch(/^worker cannot start: no contract at TREASURY_ADDRESS 0x[0-9a-f]{40}/);
  });

  it("exits 1 with one readable line when REGISTRY_ADDRESS is not the configured treasury's registry", async () => {
    const w = spawnWorker(fx, { REGISTRY_ADDRESS: randomWallet() });
    spawned.push(w);
    const exit = await waitFor("the worker to exit", async () => (w.process.exitCode !== null ? w.exited : undefined), 30_000);
    expect(exit.code).toBe(1);
    expect(fatalMessage(w)).toMatch(/^worker cannot start: REGISTRY_ADDRESS 0x[0-9a-f]{40} is not the registry of TREASURY_ADDRESS 0x[0-9a-f]{40}/);
  });

  it("exits 1 with one readable line when this database holds a relayer's nonce state for another chain", async () => {
    const relayer = privateKeyToAccount(fx.relayerKeys[0]!).address.toLowerCase();
    const chainOf = (chainId: number) =>
      fx.database.db.execute(sql`
        INSERT INTO relayer_accounts (address, chain_id) VALUES (${relayer}, ${chainId})
        ON CONFLICT (address) DO UPDATE SET chain_id = EXCLUDED.chain_id`);
    await chainOf(11155111);
    try {
      const w = spawnWorker(fx);
      spawned.push(w);
      const exit = await waitFor("the worker to exit", async () => (w.process.exitCode !== null ? w.exited : undefined), 30_000);
      expect(exit.code).toBe(1);
      expect(fatalMessage(w)).toMatch(
        new RegExp(
          `^worker cannot start: relayer ${relayer} has nonce state for chain 11155111 in this database, but RPC_URL is chain ${fx.deployment.chainId}`,
        ),
      );
    } finally {
      await chainOf(fx.deployment.chainId);
    }
  });

  it("exits 1 refusing anvil's well-known keys when the loopback RPC_URL serves another chain than 31337", async () => {
    // A loopback endpoint that is a tunnel to a real network (chain 1 here); CHAIN_ID unset, so only the chain's answer
    // can tell. Every other call goes to the local chain.
    const tunnel = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
      const parsed = JSON.parse(body) as { id: number; method?: string } | { id: number; method?: string }[];
      const calls = Array.isArray(parsed) ? parsed : [parsed];
      if (calls.length !== 1 || calls[0]!.method !== "eth_chainId") return undefined;
      const answer = { jsonrpc: "2.0", id: calls[0]!.id, result: "0x1" };
      return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? [answer] : answer) };
    });
    try {
      const w = spawnWorker(fx, { RPC_URL: tunnel.url, CHAIN_ID: "", RELAYER_PRIVATE_KEYS: LOCAL_DEV_KEYS[1] });
      spawned.push(w);
      const exit = await waitFor("the worker to exit", async () => (w.process.exitCode !== null ? w.exited : undefined), 45_000).catch((e: Error) => {
        throw new Error(`${e.message}\n${w.output()}`);
      });
      expect(exit.code).toBe(1);
      expect(fatalMessage(w)).toMatch(
        /^worker cannot start: Invalid configuration: RELAYER_PRIVATE_KEYS holds a well-known anvil development key, refused because the chain id is 1, not 31337/,
      );
    } finally {
      await tunnel.close();
    }
  }, 90_000);

  it("exits 1 naming the variable when the configuration is invalid", async () => {
    const w = spawnWorker(fx, { WORKER_INTERVAL_MS: "soon" });
    spawned.push(w);
    expect((await w.exited).code).toBe(1);
    expect(w.output()).toContain("WORKER_INTERVAL_MS");
  });
});
