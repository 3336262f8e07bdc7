import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { copyFileDurably, syncDirectory } from "@/lib/durable-file";
import { createLogger, type Logger } from "@/lib/log";
import { openLogFile } from "@/lib/log-file";
import { compactDump, isWholeDump } from "./state-dump";

/**
 * A real local chain: the anvil binary shipped by npm `@foundry-rs/anvil`, spawned directly (not through npx,
 * which leaves an orphan child) and stopped by its pid. History is pruned so memory and disk stay bounded; any
 * cache anvil keeps lives under the given data directory, never in ~/.foundry.
 *
 * Bounded growth (measured, docs/contracts.md): anvil keeps every transaction with its traces (about 4 KB each)
 * and every block header (about 1.7 KB) in memory and in its state dump. `--transaction-block-keeper` drops the
 * transactions of old blocks; old block headers are dropped from the dump before each start (`prepareStateFile`, contracts/state-dump.ts).
 * Anvil logs one line per RPC call unless quiet, so it runs with `--quiet` (errors still reach the log).
 *
 * Old states (issue 11, item 10): anvil keeps a full copy of the chain's state for every block it keeps history
 * for. `--prune-history N` should bound that to N copies, but anvil's `--block-time` (and `evm_setIntervalMining`)
 * of 2 s or less raises the limit to 1,500 (`InMemoryBlockStates::update_interval_mine_block_time`), so with 1-s
 * blocks memory grew by a full state copy a second, ever larger as wallets were sponsored (61 MB to 1.2 GB over
 * 9,600 sponsorships). So with a block time anvil runs with `--no-mining` and this process mines the blocks
 * (`evm_mine` every `blockTime` seconds, `startBlockTimer`): the same cadence, `historyStates` copies at most.
 */

export type AnvilOptions = {
  port: number;
  /** Seconds between blocks; 0 mines every transaction at once. */
  blockTime: number;
  /** Where the chain's state (when `persistState`), cache and log live. */
  dataDir: string;
  /** Dump the state on exit (and every 10 s) and load it on start, so a restart keeps the chain. */
  persistState?: boolean;
  chainId?: number;
  gasLimit?: bigint;
  extraArgs?: string[];
  /**
   * Blocks whose full state anvil keeps in memory (eth_call and nonces at a past block). Each is a copy of the
   * whole state, so memory is about this many times the state's size. Default 64 (HISTORY_STATES).
   */
  historyStates?: number;
  /** Blocks whose transactions and receipts stay queryable (older ones are dropped). Default 10,000. */
  keepBlocks?: number;
  /** Written with anvil's pid as soon as it is spawned, so a crash of ours cannot leave an unknown anvil. */
  pidFile?: string;
  /** Default true: no per-request log lines (they grow without bound under load); errors are still written. */
  quiet?: boolean;
  /**
   * Run anvil in its own process group, so a signal to the starter's whole group (Ctrl-C in a terminal) does not
   * stop the chain before the starter has stopped what uses it. The starter must then stop it (`stop()`, or by
   * `pidFile` after a crash). Default false.
   */
  ownProcessGroup?: boolean;
  /** Where a failure to write `anvil.log` (a full disk) is reported. Default: a logger of its own. */
  logger?: Logger;
};

export type Anvil = {
  rpcUrl: string;
  pid: number;
  process: ChildProcess;
  /**
   * SIGTERM (anvil dumps its state), SIGKILL after 10 s; true when it went by the SIGTERM (or had gone already). After
   * a SIGTERM, a state it did not write whole (`persistState`) is logged as an error (`stateSaved`).
   */
  stop: () => Promise<boolean>;
};

export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const pkg = path.dirname(require.resolve("@foundry-rs/anvil-linux-amd64/package.json"));
  const bin = path.join(pkg, "bin", "anvil");
  if (!existsSync(bin)) throw new Error(`anvil binary not found at ${bin}: run npm install`);
  return bin;
}

/**
 * Anvil exited at start-up because it refused its state file (`--state`): not a dump it can parse, or one it parsed
 * but could not load. Only this failure is a reason to give the chain's state up; any other (the port taken, a slow
 * start) leaves it for the next attempt.
 */
export class AnvilStateRejectedError extends Error {
  override name = "AnvilStateRejectedError";
}

/**
 * What anvil 1.7 prints when it refuses its state file: `error: invalid value '<file>' for '--state <PATH>': failed
 * to parse json file: ...` (exit 2) for a truncated file or JSON that is not a state dump, `Error: failed to load
 * init state` (exit 1) for a dump it parsed but cannot load (its best block missing).
 */
const STATE_REJECTED = /for '--state <PATH>'|failed to load init state/;

export const DEFAULT_KEEP_BLOCKS = 10_000;
/** Blocks whose full state anvil keeps by default (eth_call and nonces at a past block). */
export const HISTORY_STATES = 64;

/** The copy of the last state file anvil started from (`state.json.good`), kept beside it. */
export function goodStateFile(stateFile: string): string {
  return `${stateFile}.good`;
}

/**
 * Puts the last good state (`state.json.good`) in place of `stateFile`, which is moved to `aside`: the copy is made
 * whole first, then the file moved aside, then the copy renamed into place, so a failed copy (a full disk) or a
 * crash at any point leaves `stateFile` there (the next start tries again), never absent, which would be taken for a
 * reset. Whether it did (false: no whole good copy, or it is the file itself).
 */
export function restoreGoodState(stateFile: string, aside: string): boolean {
  const good = goodStateFile(stateFile);
  if (!isWholeDump(good)) return false;
  const restoring = `${stateFile}.restoring`;
  copyFileDurably(good, restoring);
  renameSync(stateFile, aside);
  renameSync(restoring, stateFile);
  syncDirectory(path.dirname(stateFile));
  return true;
}

/**
 * The state file compacted (the blocks and transactions older than the last `keepBlocks` dropped: anvil keeps every
 * block header, so the dump, its memory and its load time stay bounded across restarts; accounts, storage and the
 * head are kept), and a copy of it kept for after anvil has started from it (the returned candidate, which
 * startAnvil then makes `state.json.good`). Anvil writes its dump in place, truncating first, every 10 s: a kill while
 * it writes (the OOM killer, a second Ctrl-C, a power cut) leaves part of one, and with it the whole chain was lost
 * (a fresh chain, the contracts deployed again). Now a state file cut short is moved aside and the last good one
 * restored: the chain comes back as it was at the last start, and what came after is as after a fresh chain, found
 * lost and sent again (scripts/chain-replay.ts). A state file that is absent is not restored: removing it is how a
 * chain is reset, so the good copy goes with it. A compaction that cannot be written (a full disk) leaves the file as
 * it is: anvil loads it uncompacted.
 */
function prepareStateFile(stateFile: string, keepBlocks: number, logger: Logger): string | undefined {
  const dir = path.dirname(stateFile);
  const good = goodStateFile(stateFile);
  // Temporary files of a start killed while it copied or compacted (each as large as the state).
  for (const name of readdirSync(dir)) {
    if (/^state\.json\.(?:.+\.)?\d+\.tmp$|^state\.json\.restoring$/.test(name)) rmSync(path.join(dir, name), { force: true });
  }
  if (!existsSync(stateFile)) {
    if (existsSync(good)) {
      logger.info("the chain's state file is gone (a reset): its last good copy goes too", { removed: good });
      rmSync(good, { force: true });
    }
    return undefined;
  }
  let outcome: "kept" | "compacted" | "corrupt";
  try {
    outcome = compactDump(stateFile, keepBlocks);
  } catch (error) {
    logger.warn("could not compact the chain's state file (a full disk?): anvil loads it as it is", { stateFile, error });
    outcome = "kept";
  }
  if (outcome === "corrupt") {
    const aside = `${stateFile}.corrupt`;
    if (restoreGoodState(stateFile, aside)) {
      logger.warn("anvil's state file was cut short (a crash while it wrote it): restored the state it last started from", {
        stateFile,
        savedAt: statSync(good).mtime.toISOString(),
        movedTo: aside,
      });
    } else renameSync(stateFile, aside);
    return undefined;
  }
  const candidate = `${stateFile}.candidate`;
  try {
    copyFileDurably(stateFile, candidate);
    return candidate;
  } catch (error) {
    // A full disk: the chain still starts, without a copy to fall back on.
    logger.warn("could not copy the state file before anvil's start", { error });
    return undefined;
  }
}

async function rpcReady(rpcUrl: string): Promise<boolean> {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

export async function startAnvil(options: AnvilOptions): Promise<Anvil> {
  const dir = path.resolve(options.dataDir);
  mkdirSync(dir, { recursive: true });
  const keepBlocks = options.keepBlocks ?? DEFAULT_KEEP_BLOCKS;
  const args = [
    "--host",
    "127.0.0.1",
    "--port",
    String(options.port),
    "--prune-history",
    String(options.historyStates ?? HISTORY_STATES),
    "--cache-path",
    path.join(dir, "cache"),
    "--chain-id",
    String(options.chainId ?? 31337),
    "--gas-limit",
    String(options.gasLimit ?? 30_000_000n),
    "--accounts",
    "10",
    "--balance",
    "1000000",
    "--transaction-block-keeper",
    String(keepBlocks),
  ];
  if (options.quiet ?? true) args.push("--quiet");
  // Not `--block-time`: it lifts anvil's state history from 64 to 1,500 full copies (see the top of this file).
  // `--no-mining` leaves the pool alone and the block timer below mines on the same cadence.
  if (options.blockTime > 0) args.push("--no-mining");
  const logger = options.logger ?? createLogger({ component: "anvil" });
  const stateFile = options.persistState ? path.join(dir, "state.json") : undefined;
  const candidate = stateFile ? prepareStateFile(stateFile, keepBlocks, logger) : undefined;
  if (stateFile) args.push("--state", stateFile, "--state-interval", "10");
  args.push(...(options.extraArgs ?? []));

  const logFile = path.join(dir, "anvil.log");
  const log = openLogFile(logFile, logger);
  const child = spawn(anvilBinary(), args, {
    stdio: ["ignore", "pipe", "pipe"],
    // NO_COLOR: its words are matched (STATE_REJECTED), and a colour code inside them would hide a refusal.
    env: { ...process.env, HOME: dir, NO_COLOR: "1" },
    detached: options.ownProcessGroup ?? false,
  });
  // A failed spawn (EAGAIN, ENOENT, EMFILE...) comes as an "error" event, which unhandled would end the whole
  // process (npm start's supervisor); it fails this start instead, as anvil exiting would.
  let spawnError: Error | undefined;
  child.on("error", (error) => (spawnError ??= error));
  if (options.pidFile && child.pid) {
    try {
      writeFileSync(options.pidFile, String(child.pid));
    } catch (error) {
      // Unrecorded, an anvil outlives a crash of ours with nothing to find it by (its port then refused for good).
      child.kill("SIGKILL");
      log.close();
      throw new Error(`anvil's pid file ${options.pidFile} could not be written: ${(error as Error).message}`, { cause: error });
    }
  }
  // What anvil said while starting, to tell why it exited if it does (its last few KB).
  let starting = true;
  let said = "";
  const output = (chunk: Buffer) => {
    log.write(chunk);
    if (starting) said = (said + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on("data", output);
  child.stderr?.on("data", output);
  // "close" comes once its output has all been read.
  const closed = new Promise<void>((resolve) => child.once("close", () => (log.close(), resolve())));
  const rpcUrl = `http://127.0.0.1:${options.port}`;

  let exited = false;
  const exitedPromise = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));

  const deadline = Date.now() + 20_000;
  // A start that fails leaves no candidate beside the state it kept.
  const failed = (error: Error): Error => {
    if (candidate) rmSync(candidate, { force: true });
    return error;
  };
  while (!(await rpcReady(rpcUrl))) {
    if (spawnError) {
      log.close();
      throw failed(new Error(`anvil could not be started: ${spawnError.message}`, { cause: spawnError }));
    }
    if (exited) {
      // Its last words may still be in the pipes when "exit" comes.
      await Promise.race([closed, new Promise((r) => setTimeout(r, 2_000).unref())]);
      const reason = said.trim();
      const message = `anvil exited during start-up${reason ? `: ${reason}` : ""} (see ${logFile})`;
      throw failed(STATE_REJECTED.test(reason) ? new AnvilStateRejectedError(message) : new Error(message));
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw failed(new Error(`anvil did not answer on ${rpcUrl} within 20 s`));
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  starting = false;
  said = "";
  // Anvil started from it: from now on it is the last good state (prepareStateFile).
  if (candidate && stateFile) {
    try {
      renameSync(candidate, goodStateFile(stateFile));
      syncDirectory(dir);
    } catch (error) {
      logger.warn("could not keep a copy of the state anvil started from", { error });
    }
  }

  const blocks = options.blockTime > 0 ? startBlockTimer(rpcUrl, options.blockTime) : undefined;
  child.once("exit", () => blocks?.stop());

  return {
    rpcUrl,
    pid: child.pid!,
    process: child,
    stop: async () => {
      blocks?.stop();
      if (exited) return true;
      // SIGTERM lets anvil dump its state; SIGKILL if it does not go.
      const since = stateFile ? (stopMarkerTime(dir) ?? Date.now() - 1_000) : 0;
      child.kill("SIGTERM");
      let killed = false;
      const timer = setTimeout(() => ((killed = true), child.kill("SIGKILL")), 10_000);
      await exitedPromise;
      clearTimeout(timer);
      const saved = stateFile && !killed ? stateSaved(stateFile, since) : "saved";
      if (saved !== "saved") logger.error(STATE_LOST[saved], { stateFile });
      return !killed;
    },
  };
}

/**
 * What anvil left of its state at its stop. Anvil 1.7 exits 0 and prints nothing when it cannot write its dump, so
 * it is read here, by the test the next start applies (isWholeDump): "saved" (written since `since`,
 * and parses), "not_written" (older than `since`, and parses: it could not open the file, a read-only disk, a
 * permission; the next start loads the last periodic dump, up to 10 s older), "absent" (no file: the next start
 * begins a fresh chain), "truncated" (does not parse: anvil writes in place, truncating first, so a full disk leaves
 * part of a dump, which the next start sets aside as corrupt for a fresh chain). `since` is the time of a marker file
 * written in the same directory just before the stop (the same clock and granularity: a file system with 1-s or 2-s
 * timestamps compares equal, not earlier), or a second before the stop without one.
 */
export function stateSaved(stateFile: string, since: number): "saved" | "not_written" | "absent" | "truncated" {
  let modified: number;
  try {
    const stat = statSync(stateFile);
    if (!stat.isFile()) return "absent";
    modified = stat.mtimeMs;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "absent";
    return "truncated";
  }
  // A file that cannot be read or is no whole dump (EIO, cut short) is what the next start sets aside too.
  if (!isWholeDump(stateFile)) return "truncated";
  return modified < since ? "not_written" : "saved";
}

const STATE_LOST: Record<Exclude<ReturnType<typeof stateSaved>, "saved">, string> = {
  not_written:
    "anvil stopped without saving the chain's state (it could not write the file: a read-only disk, a permission?): the next start loads its last periodic save, from before the stop",
  absent: "anvil stopped without saving the chain's state: no state file was written, so the next start begins a fresh chain",
  truncated: "anvil's state file is incomplete or unreadable after its stop (a full disk?): the next start sets it aside as corrupt and begins a fresh chain",
};

/** Written just before the stop, for its file-system time (`stateSaved`); undefined when it cannot be written. */
function stopMarkerTime(dir: string): number | undefined {
  const marker = path.join(dir, "stop-marker");
  try {
    writeFileSync(marker, "");
    const time = statSync(marker).mtimeMs;
    rmSync(marker, { force: true });
    return time;
  } catch {
    return undefined;
  }
}

async function mineOne(rpcUrl: string): Promise<void> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "evm_mine", params: [] }),
    signal: AbortSignal.timeout(5_000),
  });
  await res.body?.cancel();
}

/**
 * Mines a block every `seconds` (what anvil's `--block-time` does, without its 1,500-state history): one
 * `evm_mine` at each tick of a fixed cadence, never two at once; a tick missed while anvil was busy or down is
 * skipped, not caught up. A block holds what the pool has, up to the gas limit; the rest waits for the next one.
 */
export function startBlockTimer(rpcUrl: string, seconds: number): { stop: () => void } {
  const periodMs = seconds * 1000;
  let stopped = false;
  let handle: NodeJS.Timeout | undefined;
  let next = Date.now() + periodMs;
  const tick = async () => {
    if (stopped) return;
    // A refused or timed-out call (anvil restarting, busy) only costs this block; the cadence goes on.
    await mineOne(rpcUrl).catch(() => undefined);
    if (stopped) return;
    const now = Date.now();
    next += periodMs;
    while (next <= now) next += periodMs;
    handle = setTimeout(tick, next - now);
    handle.unref();
  };
  handle = setTimeout(tick, periodMs);
  handle.unref();
  return {
    stop: () => {
      stopped = true;
      if (handle) clearTimeout(handle);
    },
  };
}
