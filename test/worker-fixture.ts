import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { asc, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll } from "vitest";
import { getAbiItem, type Address, type Hash, type Hex } from "viem";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import type { Anvil } from "@/contracts/anvil";
import { deployContracts, type DeployResult } from "@/contracts/deploy-lib";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { relayTransactions, sponsorshipRequests, workerHeartbeats, type RelayTransaction, type SponsorshipRequest } from "@/db/schema";
import { createChainClients, type ChainClients } from "@/lib/chain/clients";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS, parseConfig, resetConfigForTests, type Config } from "@/lib/config";
import { createLogger, type Logger } from "@/lib/log";
import { createSponsorshipRequest } from "@/lib/sponsorship/create-request";
import { registerWallet } from "@/lib/sponsorship/wallets";
import { chainRpc, startTestChain } from "@/test/chain";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import type { WorkerSettings } from "@/worker/context";
import type { HeartbeatDetails } from "@/worker/heartbeat";
import { startWorker, type RunningWorker } from "@/worker/worker";

/**
 * Shared by the worker's integration tests: a real PostgreSQL database (test/db.ts), a real anvil (test/chain.ts)
 * with the contracts deployed (contracts/deploy-lib.ts), requests created through the API's own domain functions,
 * and workers either in this process or as real `tsx worker/index.ts` processes (for kill -9 and two workers).
 * Waiting is always polling for a condition with a deadline. A test file takes its fixture with
 * `setUpPipelineFixture` (started before its tests, stopped after them).
 */

const ROOT = path.resolve(import.meta.dirname, "..");
export const SPONSOR_AMOUNT = 10n ** 16n;

export type PipelineFixture = {
  database: TestDatabase;
  anvil: Anvil;
  deployment: DeployResult;
  clients: ChainClients;
  relayerKeys: Hex[];
  dataDir: string;
  /** Environment for a worker (process or in-process config). */
  env: (overrides?: Record<string, string>) => Record<string, string>;
  config: (overrides?: Record<string, string>) => Config;
  stop: () => Promise<void>;
};

export async function startPipelineFixture(
  options: { blockTime?: number; relayers?: number; fundWei?: bigint; extraRelayers?: Address[] } = {},
): Promise<PipelineFixture> {
  const database = await createTestDatabase();
  const relayerKeys = LOCAL_RELAYER_KEYS.slice(0, options.relayers ?? 1) as Hex[];
  let anvil: Anvil | undefined;
  let deployment: DeployResult;
  try {
    anvil = await startTestChain({ blockTime: options.blockTime ?? 0 });
    deployment = await deployContracts({
      rpcUrl: anvil.rpcUrl,
      deployerKey: LOCAL_DEPLOYER_KEY,
      relayers: [...relayerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase() as Address), ...(options.extraRelayers ?? [])],
      sponsorAmountWei: SPONSOR_AMOUNT,
      fundWei: options.fundWei ?? 10n ** 21n,
      pollingIntervalMs: 50,
    });
  } catch (error) {
    // The caller gets no fixture to stop: what started is stopped here, or the chain outlived the test file.
    await Promise.allSettled([anvil?.stop(), database.drop()]);
    throw error;
  }
  const clients = createChainClients({ rpcUrl: anvil.rpcUrl, chainId: deployment.chainId, pollingIntervalMs: 50 });
  const dataDir = await mkdtemp(path.join(tmpdir(), "worker-test-"));
  const env = (overrides: Record<string, string> = {}) => ({
    DATABASE_URL: database.url,
    RPC_URL: anvil.rpcUrl,
    CHAIN_ID: String(deployment.chainId),
    REGISTRY_ADDRESS: deployment.registryAddress,
    TREASURY_ADDRESS: deployment.treasuryAddress,
    RELAYER_PRIVATE_KEYS: relayerKeys.join(","),
    DATA_DIR: dataDir,
    WORKER_INTERVAL_MS: "1000",
    RELAY_TIMEOUT_MS: "60000",
    MAX_RELAY_ATTEMPTS: "5",
    RATE_LIMIT_IP_PER_HOUR: "1000000",
    RATE_LIMIT_WALLET_PER_HOUR: "1000000",
    REGISTER_LIMIT_IP_PER_HOUR: "1000000",
    REPLAY_WINDOW_MS: "0",
    LOG_LEVEL: "info",
    ...overrides,
  });
  return {
    database,
    anvil,
    deployment,
    clients,
    relayerKeys,
    dataDir,
    env,
    config: (overrides) => parseConfig(env(overrides)),
    stop: async () => {
      await anvil.stop().catch(() => {});
      await database.drop().catch(() => {});
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * The worker test files' one setup: a fixture started before the file's tests (`onStart` receives it) and stopped
 * after them, once every later-registered `afterAll` of the file has run (Vitest runs after-hooks as a stack).
 */
export function setUpPipelineFixture(options: Parameters<typeof startPipelineFixture>[0], onStart: (fx: PipelineFixture) => void): void {
  let fx: PipelineFixture | undefined;
  beforeAll(async () => {
    fx = await startPipelineFixture(options);
    onStart(fx);
  });
  afterAll(async () => {
    await fx?.stop();
  });
}

export function randomWallet(): Address {
  return privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;
}

let ipCounter = 0;

/** Registers a fresh wallet (or the given one) and creates a pending request through the API's domain functions. */
export async function createRequest(fx: PipelineFixture, wallet: Address = randomWallet()): Promise<{ id: string; wallet: Address }> {
  const config = fx.config();
  ipCounter++;
  const ip = `10.${(ipCounter >> 16) & 255}.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
  await registerWallet(fx.database.db, { walletAddress: wallet, ip }, { config });
  const { request } = await createSponsorshipRequest(
    fx.database.db,
    { walletAddress: wallet, ip, userAgent: "worker-test" },
    { config, registryAddress: fx.deployment.registryAddress.toLowerCase() },
  );
  return { id: request.id, wallet };
}

/** Sponsors `wallet` on-chain from the treasury's owner, behind the service's back; answers the block it is mined in. */
export async function sponsorOnChain(fx: PipelineFixture, wallet: Address): Promise<bigint> {
  const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
  const hash = await owner.writeContract({
    address: fx.deployment.treasuryAddress,
    abi: treasuryAbi,
    functionName: "sponsor",
    args: [wallet, requestIdHash(crypto.randomUUID())],
  });
  return (await fx.clients.waitForTransactionReceipt({ hash })).blockNumber;
}

export async function createRequests(fx: PipelineFixture, count: number): Promise<{ id: string; wallet: Address }[]> {
  const out: { id: string; wallet: Address }[] = [];
  // A few at a time: the domain function takes per-IP and per-wallet locks, all distinct here.
  for (let i = 0; i < count; i += 20) {
    out.push(...(await Promise.all(Array.from({ length: Math.min(20, count - i) }, () => createRequest(fx)))));
  }
  return out;
}

// WORKER_TEST_LOGS=1 shows the in-process workers' logs while debugging a test.
if (process.env.WORKER_TEST_LOGS) {
  process.env.LOG_LEVEL = "debug";
  resetConfigForTests();
}
const quiet = createLogger({ test: "worker" });

/** A worker in this process (fast heartbeats for tests); stop it with `stop()`. */
export async function startInProcessWorker(
  fx: PipelineFixture,
  env: Record<string, string> = {},
  settings: Partial<WorkerSettings> = {},
  log: Logger = quiet,
): Promise<RunningWorker> {
  return startWorker({ config: fx.config(env), log, settings: { heartbeatMs: 500, ...settings } });
}

export type SpawnedWorker = {
  pid: number;
  process: ChildProcess;
  /** Everything the process wrote so far (JSON lines). */
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

/** A real worker process: `node --import tsx worker/index.ts`, as `npm start` runs it. */
export function spawnWorker(fx: PipelineFixture, env: Record<string, string> = {}): SpawnedWorker {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "worker", "index.ts")], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NODE_ENV: "test", ...fx.env(env) } as NodeJS.ProcessEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let buffer = "";
  child.stdout?.on("data", (d: Buffer) => (buffer += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (buffer += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { pid: child.pid!, process: child, output: () => buffer, exited };
}

/** Stops a spawned worker by its pid (SIGTERM, then SIGKILL after 20 s). */
export async function stopSpawned(worker: SpawnedWorker): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (worker.process.exitCode !== null || worker.process.signalCode !== null) return worker.exited;
  worker.process.kill("SIGTERM");
  const timer = setTimeout(() => worker.process.kill("SIGKILL"), 20_000);
  const result = await worker.exited;
  clearTimeout(timer);
  return result;
}

/** Polls `check` until it returns something other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 30_000, intervalMs = 100): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    if (performance.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last).slice(0, 300)})` : ""}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The details of a worker's heartbeat row (worker/heartbeat.ts), undefined before its first beat. */
export async function readHeartbeat(fx: PipelineFixture, workerId: string): Promise<HeartbeatDetails | undefined> {
  const [row] = await fx.database.db.select().from(workerHeartbeats).where(eq(workerHeartbeats.workerId, workerId));
  return row?.details as HeartbeatDetails | undefined;
}

export async function readRequest(fx: PipelineFixture, id: string): Promise<SponsorshipRequest> {
  const [row] = await fx.database.db.select().from(sponsorshipRequests).where(eq(sponsorshipRequests.id, id));
  if (!row) throw new Error(`request ${id} not found`);
  return row;
}

/** Polls until the request has `status`, then returns its row (fails after `timeoutMs`). */
export async function waitForStatus(fx: PipelineFixture, id: string, status: string, timeoutMs = 20_000): Promise<SponsorshipRequest> {
  return waitFor(
    `request ${id} to be ${status}`,
    async () => {
      const row = await readRequest(fx, id);
      return row.status === status ? row : undefined;
    },
    timeoutMs,
  );
}

export async function readRelays(fx: PipelineFixture, requestId: string): Promise<RelayTransaction[]> {
  return fx.database.db
    .select()
    .from(relayTransactions)
    .where(eq(relayTransactions.sponsorshipRequestId, requestId))
    .orderBy(asc(relayTransactions.relayAttempt));
}

export async function countByStatus(fx: PipelineFixture, ids: readonly string[]): Promise<Record<string, number>> {
  const rows = await fx.database.db.execute<{ status: string; n: number }>(
    sql`SELECT status, count(*)::int AS n FROM sponsorship_requests WHERE id IN (${sql.join(
      ids.map((id) => sql`${id}::uuid`),
      sql`, `,
    )}) GROUP BY status`,
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** Waits until every request is terminal; returns the counts by status. */
export async function waitTerminal(fx: PipelineFixture, ids: readonly string[], timeoutMs: number): Promise<Record<string, number>> {
  return waitFor(
    `${ids.length} requests to finish`,
    async () => {
      const counts = await countByStatus(fx, ids);
      const open = (counts.pending ?? 0) + (counts.approved ?? 0) + (counts.relayed ?? 0);
      return open === 0 ? counts : undefined;
    },
    timeoutMs,
    250,
  );
}

const sponsoredEvent = getAbiItem({ abi: treasuryAbi, name: "Sponsored" });

/**
 * Every Sponsored event of the treasury: the chain's own count of payments. An event carries only the hash of
 * its request id; `requestId` is the request of this fixture's database with that hash (null if none has it).
 */
export async function readSponsoredEvents(
  fx: PipelineFixture,
): Promise<{ requestId: string | null; requestIdHash: Hash; wallet: string; transactionHash: Hash }[]> {
  const logs = await fx.clients.getLogs({ address: fx.deployment.treasuryAddress, event: sponsoredEvent, fromBlock: 0n, toBlock: "latest" });
  const requests = await fx.database.db.select({ id: sponsorshipRequests.id }).from(sponsorshipRequests);
  const byHash = new Map(requests.map((r) => [requestIdHash(r.id), r.id]));
  return logs.map((l) => ({
    requestId: byHash.get(l.args.requestIdHash!) ?? null,
    requestIdHash: l.args.requestIdHash!,
    wallet: l.args.wallet!.toLowerCase(),
    transactionHash: l.transactionHash!,
  }));
}

/** Raw JSON-RPC to the test anvil (mining control, dropping transactions). */
export async function anvilRpc<T = unknown>(fx: PipelineFixture, method: string, params: unknown[] = []): Promise<T> {
  return chainRpc<T>(fx.anvil.rpcUrl, method, params);
}

/** Relayer nonces on the chain: mined (latest) and with the pool (pending). */
export async function chainNonces(fx: PipelineFixture, relayer: Address): Promise<{ latest: number; pending: number }> {
  const [latest, pending] = await Promise.all([
    fx.clients.getTransactionCount({ address: relayer, blockTag: "latest" }),
    fx.clients.getTransactionCount({ address: relayer, blockTag: "pending" }),
  ]);
  return { latest, pending };
}

export function relayerAddress(key: Hex): Address {
  return privateKeyToAccount(key).address.toLowerCase() as Address;
}
