import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { embeddedServiceUrl, embeddedSuperuserUrl } from "@/db/embedded";
import { LOCAL_RELAYER_KEYS } from "@/lib/config";
import { spawnInstance as spawnServiceInstance, stopInstance } from "@/test/instances";
import { freePort } from "@/test/ports";
import { stackCpuGroups, type CpuGroups } from "./cpu";
import { note, waitFor, type Address } from "./util";

/**
 * Brings up the whole service for the bench exactly as a user would (`node --import tsx scripts/start.ts`, the
 * `npm start` supervisor) on free ports and a temporary DATA_DIR, and stops it again by pid. Or attaches to a
 * running one (BENCH_URL).
 */

const ROOT = path.resolve(import.meta.dirname, "..");

export type Stack = {
  name: string;
  /** The checkout the stack runs from (this tree, or another one in the trees comparison). */
  root: string;
  url: string;
  /** Undefined when attached to a running stack without BENCH_DATABASE_URL. */
  databaseUrl: string | undefined;
  rpcUrl: string | undefined;
  chainId: number | undefined;
  registryAddress: Address | undefined;
  treasuryAddress: Address | undefined;
  adminToken: string | undefined;
  blockTime: number | undefined;
  /** The environment the supervisor gave its children (for extra instances in the scale-out run). */
  childEnv: NodeJS.ProcessEnv | undefined;
  /** The stack's processes by part (web, worker, postgres, anvil, bench), for CPU accounting. */
  cpu: CpuGroups | undefined;
  /** Pids of the supervisor's children, from DATA_DIR/processes.json. */
  pids(): Record<string, number>;
  /** SIGSTOP / SIGCONT the stack's worker (it keeps its connections; the supervisor sees no exit). */
  pauseWorker(): void;
  resumeWorker(): void;
  stop(): Promise<void>;
};

/** Limits far above what the bench sends: the bench measures the service, not its abuse controls. */
export const BENCH_LIMITS = {
  RATE_LIMIT_IP_PER_HOUR: "1000000000",
  RATE_LIMIT_WALLET_PER_HOUR: "1000000000",
  REGISTER_LIMIT_IP_PER_HOUR: "1000000000",
  REPLAY_WINDOW_MS: "5000",
};

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

export async function startStack(options: {
  name: string;
  blockTime: number;
  logDir: string;
  env?: Record<string, string>;
  /** Another checkout to run (`BENCH_COMPARE_ROOT`: the tree before a change, measured in the same run). */
  root?: string;
}): Promise<Stack> {
  const root = options.root ?? ROOT;
  const dataDir = await mkdtemp(path.join(tmpdir(), `sponsorship-bench-${options.name}-`));
  const [port, pgPort, chainPort] = [await freePort(), await freePort(), await freePort()];
  const adminToken = randomBytes(24).toString("base64url");
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ["DATABASE_URL", "RPC_URL", "CHAIN_ID", "REGISTRY_ADDRESS", "TREASURY_ADDRESS", "METRICS_PORT", "NODE_OPTIONS"]) delete env[k];
  Object.assign(env, {
    DATA_DIR: dataDir,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(pgPort),
    LOCAL_CHAIN_PORT: String(chainPort),
    LOCAL_BLOCK_TIME: String(options.blockTime),
    TRUST_PROXY: "1",
    ADMIN_TOKEN: adminToken,
    // BENCH_LOG_LEVEL=debug: the worker's pass timings ("iteration", "confirmed") in stack-<name>.log.
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn",
    ...BENCH_LIMITS,
    ...options.env,
  });
  const url = `http://127.0.0.1:${port}`;
  note(`starting stack "${options.name}" (LOCAL_BLOCK_TIME=${options.blockTime}) on ${url}, DATA_DIR ${dataDir}`);
  const log = createWriteStream(path.join(options.logDir, `stack-${options.name}.log`), { flags: "a" });
  const supervisor: ChildProcess = spawn(process.execPath, ["--import", "tsx", path.join(root, "scripts", "start.ts")], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  supervisor.stdout?.pipe(log, { end: false });
  supervisor.stderr?.pipe(log, { end: false });
  const exited = new Promise<number | null>((resolve) => supervisor.once("exit", (code) => resolve(code)));
  let supervisorExited = false;
  void exited.then(() => (supervisorExited = true));

  const pids = (): Record<string, number> => {
    try {
      return JSON.parse(readFileSync(path.join(dataDir, "processes.json"), "utf8")) as Record<string, number>;
    } catch {
      return {};
    }
  };
  const signalWorker = (signal: NodeJS.Signals) => {
    const pid = pids().worker;
    if (pid && alive(pid)) process.kill(pid, signal);
  };

  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    signalWorker("SIGCONT");
    if (!supervisorExited && supervisor.pid) {
      note(`stopping stack "${options.name}" (supervisor pid ${supervisor.pid})`);
      supervisor.kill("SIGTERM");
      const done = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 60_000))]);
      if (!done) {
        // Our own processes only: the supervisor and the children it recorded.
        for (const pid of Object.values(pids())) if (alive(pid)) process.kill(pid, "SIGKILL");
      }
    }
    log.end();
    await rm(dataDir, { recursive: true, force: true }).catch(() => {});
  };

  try {
    // The first start of a changed tree builds the Next.js app: allow for it.
    await waitFor(
      `stack "${options.name}" to answer /health`,
      async () => {
        if (supervisorExited) throw new Error(`npm start exited during start-up; see ${path.join(options.logDir, `stack-${options.name}.log`)}`);
        return (await healthy(url)) ? true : undefined;
      },
      { timeoutMs: 15 * 60_000, intervalMs: 500 },
    );
    const deployment = JSON.parse(readFileSync(path.join(dataDir, "deployment.json"), "utf8")) as {
      chainId: number;
      rpcUrl: string;
      registryAddress: Address;
      treasuryAddress: Address;
    };
    // Trees before issue 11 ran the embedded PostgreSQL as postgres/postgres and connected as that superuser.
    const legacy = !readFileSync(path.join(root, "db", "embedded.ts"), "utf8").includes("embeddedSuperuserUrl");
    const legacyUrl = `postgres://postgres:postgres@127.0.0.1:${pgPort}/sponsorship`;
    const databaseUrl = legacy ? legacyUrl : embeddedServiceUrl(dataDir, pgPort);
    await waitFor("the worker's pid", () => (pids().worker ? true : undefined), { timeoutMs: 60_000 });
    const childEnv: NodeJS.ProcessEnv = {
      ...env,
      NODE_ENV: "production",
      NEXT_TELEMETRY_DISABLED: "1",
      DATABASE_URL: databaseUrl,
      RPC_URL: deployment.rpcUrl,
      CHAIN_ID: String(deployment.chainId),
      REGISTRY_ADDRESS: deployment.registryAddress,
      TREASURY_ADDRESS: deployment.treasuryAddress,
      // What the supervisor gives its children: with RPC_URL set the default would be no keys at all.
      RELAYER_PRIVATE_KEYS: env.RELAYER_PRIVATE_KEYS ?? LOCAL_RELAYER_KEYS.join(","),
    };
    note(`stack "${options.name}" is up`);
    return {
      name: options.name,
      root,
      url,
      // The bench seeds with triggers bypassed (session_replication_role), which takes the superuser; the service's
      // own processes (childEnv) keep the service role.
      databaseUrl: legacy ? legacyUrl : embeddedSuperuserUrl(dataDir, pgPort),
      rpcUrl: deployment.rpcUrl,
      chainId: deployment.chainId,
      registryAddress: deployment.registryAddress,
      treasuryAddress: deployment.treasuryAddress,
      adminToken,
      blockTime: options.blockTime,
      childEnv,
      cpu: stackCpuGroups(dataDir, pids),
      pids,
      pauseWorker: () => signalWorker("SIGSTOP"),
      resumeWorker: () => signalWorker("SIGCONT"),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A stack someone else runs (BENCH_URL); database and chain parts need BENCH_DATABASE_URL / BENCH_RPC_URL. */
export async function attachStack(env: NodeJS.ProcessEnv): Promise<Stack> {
  const url = (env.BENCH_URL ?? "").replace(/\/$/, "");
  if (!(await healthy(url))) throw new Error(`BENCH_URL ${url} does not answer GET /health with 200`);
  let deployment: { treasuryAddress?: Address; registryAddress?: Address; chainId?: number } = {};
  if (env.BENCH_DATA_DIR && existsSync(path.join(env.BENCH_DATA_DIR, "deployment.json"))) {
    deployment = JSON.parse(readFileSync(path.join(env.BENCH_DATA_DIR, "deployment.json"), "utf8")) as typeof deployment;
  }
  return {
    name: "attached",
    root: ROOT,
    url,
    databaseUrl: env.BENCH_DATABASE_URL,
    rpcUrl: env.BENCH_RPC_URL,
    chainId: deployment.chainId,
    registryAddress: (env.BENCH_REGISTRY_ADDRESS as Address | undefined) ?? deployment.registryAddress,
    treasuryAddress: (env.BENCH_TREASURY_ADDRESS as Address | undefined) ?? deployment.treasuryAddress,
    adminToken: env.BENCH_ADMIN_TOKEN,
    blockTime: undefined,
    childEnv: undefined,
    cpu: undefined,
    pids: () => ({}),
    pauseWorker: () => {},
    resumeWorker: () => {},
    stop: async () => {},
  };
}

/** An extra web server or worker against the stack's database and chain (the scale-out run), by test/instances.ts's spawner. */
export function spawnInstance(
  stack: Stack,
  kind: "web" | "worker",
  env: Record<string, string>,
  logDir: string,
  options: { nodeArgs?: readonly string[] } = {},
): { pid: number; stop(): Promise<void> } {
  if (!stack.childEnv) throw new Error("extra instances need a stack the bench started");
  const entry = kind === "web" ? "server.ts" : path.join("worker", "index.ts");
  // nodeArgs: e.g. --cpu-prof (refused in NODE_OPTIONS, so given on the command line); the profile is written at exit.
  const instance = spawnServiceInstance(
    entry,
    { ...stack.childEnv, ...env },
    path.join(logDir, `${stack.name}-${kind}-${env.PORT ?? process.hrtime.bigint()}.log`),
    {
      nodeArgs: options.nodeArgs,
      root: stack.root,
    },
  );
  return { pid: instance.proc.pid!, stop: () => stopInstance(instance) };
}

export { healthy };
