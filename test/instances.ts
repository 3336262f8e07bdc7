import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { waitFor } from "@/bench/util";

/**
 * Real service processes for tests over real HTTP: `server.ts` (the web server as `npm start` runs it, on the
 * production build: call buildIfStale first) and `worker/index.ts`, each logging to a file of the test's. The one
 * spawner for extra instances: the scale-out test and the benchmark's scale-out run (bench/stack.ts) both use it.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

export type Instance = { proc: ChildProcess; exited: Promise<void>; logFile: string };

/**
 * The environment of a lone web server (`server.ts`) for a test: the production build, quiet logs, its own port,
 * data directory, database and administrator token, no proxy hop trusted; nothing of a chain, a worker's keys, a
 * metrics port or a supervisor inherited from the test runner's environment.
 */
export function webServerEnv(settings: { port: number; dataDir: string; databaseUrl: string; adminToken: string }): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    LOG_LEVEL: "warn",
    PORT: String(settings.port),
    DATA_DIR: settings.dataDir,
    DATABASE_URL: settings.databaseUrl,
    ADMIN_TOKEN: settings.adminToken,
    TRUST_PROXY: "0",
  };
  for (const name of ["RPC_URL", "METRICS_PORT", "SUPERVISOR_PID", "CHAIN_ID", "RELAYER_PRIVATE_KEYS"]) delete env[name];
  return env;
}

/** `options.root`: the checkout to run (default this one); `options.nodeArgs`: node flags before the entry (e.g. --cpu-prof). */
export function spawnInstance(entry: string, env: NodeJS.ProcessEnv, logFile: string, options: { nodeArgs?: readonly string[]; root?: string } = {}): Instance {
  const root = options.root ?? ROOT;
  const proc = spawn(process.execPath, [...(options.nodeArgs ?? []), "--import", "tsx", path.join(root, entry)], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = createWriteStream(logFile, { flags: "a" });
  proc.stdout?.pipe(log, { end: false });
  proc.stderr?.pipe(log, { end: false });
  const exited = new Promise<void>((resolve) => proc.once("exit", () => (log.end(), resolve())));
  return { proc, exited, logFile };
}

/** SIGTERM (after a SIGCONT, in case a bench paused it), then SIGKILL after 20 s; by the child's own pid. */
export async function stopInstance(i: Instance | undefined): Promise<void> {
  if (!i || i.proc.exitCode !== null || i.proc.signalCode !== null) return;
  i.proc.kill("SIGCONT");
  i.proc.kill("SIGTERM");
  const killer = setTimeout(() => i.proc.kill("SIGKILL"), 20_000);
  await i.exited;
  clearTimeout(killer);
}

/**
 * Ready when /health answers 200 while the instance is still running: an instance that exits (a port already
 * taken, a bad setting) fails here with its log, not later through whatever holds its port.
 */
export async function waitUntilServing(url: string, instance: Instance, timeoutMs = 90_000): Promise<void> {
  await waitFor(
    `${url}/health`,
    async () => {
      const { exitCode, signalCode } = instance.proc;
      if (exitCode !== null || signalCode !== null) {
        throw new Error(`${instance.logFile}: exited (${exitCode ?? signalCode}): ${await readFile(instance.logFile, "utf8").catch(() => "")}`);
      }
      try {
        const res = await fetch(`${url}/health`);
        return res.status === 200 ? true : undefined;
      } catch {
        return undefined;
      }
    },
    { timeoutMs, intervalMs: 200 },
  );
}

export type Answer = { status: number; body: Record<string, unknown>; retryAfter: string | null; contentType: string | null };

/** A JSON POST as a client behind one trusted proxy hop (`x-forwarded-for: ip`). */
export async function post(base: string, route: string, body: unknown, ip: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${base}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": ip, ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: (text === "" ? {} : JSON.parse(text)) as Record<string, unknown>,
    retryAfter: res.headers.get("retry-after"),
    contentType: res.headers.get("content-type"),
  };
}
