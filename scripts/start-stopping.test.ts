import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alive, NpmStartStack } from "@/test/npm-start";
import { freePort } from "@/test/ports";

/**
 * `npm start` always stops (README "npm start", docs/deployment.md "`npm start` heals itself and keeps its
 * secrets"): a PostgreSQL that no longer answers is killed after a bounded wait, a second signal forces the exit at
 * once, a stop that had to force anything exits 1, and a service still starting when the signal comes is stopped
 * once started rather than left running.
 */

let dataDir: string;
let env: NodeJS.ProcessEnv;
let port: number;
let stack: NpmStartStack;
let supervisor: ChildProcess | undefined;

/** The pids whose parent is `pid` (a postmaster's backends), from /proc. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function signal(pids: number[], sig: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, sig);
    } catch {
      // gone already
    }
  }
}

/** The live pid a pid file names, or undefined while it has none (absent, empty, or a dead pid left by a kill). */
function livePid(file: string, exclude: number[] = []): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, "utf8").split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 && !exclude.includes(pid) && alive(pid) ? pid : undefined;
}

/** Polls every 10 ms (a window of a few hundred ms must not be missed), at most `ms`. */
async function soon<T>(what: string, probe: () => T | undefined, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms\n${stack.output.slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

/** The exit code, or "still running" after `ms`. */
function exitWithin(child: ChildProcess, ms: number): Promise<number | null | "still running"> {
  return Promise.race([exitOf(child), new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), ms).unref())]);
}

/** Whatever a failed test left: every pid it names continued and killed, the supervisor last. */
async function killLeftovers(pids: number[]): Promise<void> {
  signal(pids, "SIGCONT");
  signal(pids, "SIGKILL");
  if (supervisor && supervisor.exitCode === null && supervisor.signalCode === null) {
    supervisor.kill("SIGKILL");
    await exitOf(supervisor);
  }
}

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-stopping-"));
  port = await freePort();
  env = {
    ...process.env,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(await freePort()),
    LOCAL_CHAIN_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    LOCAL_BLOCK_TIME: "0",
    WORKER_INTERVAL_MS: "500",
    LOG_LEVEL: "info",
  };
  for (const name of ["DATABASE_URL", "RPC_URL", "ADMIN_TOKEN", "REGISTRY_ADDRESS", "TREASURY_ADDRESS", "RELAYER_PRIVATE_KEYS"]) delete env[name];
  stack = new NpmStartStack(env, dataDir, port);
});

afterAll(async () => {
  if (supervisor && supervisor.exitCode === null && supervisor.signalCode === null) await stack.stop(supervisor);
  await rm(dataDir, { recursive: true, force: true });
}, 120_000);

describe("npm start stops", () => {
  it("takes a Ctrl-C that arrives twice at once (the terminal's and npm's forward) for one: stops in order, exit 0", async () => {
    stack.output = "";
    supervisor = stack.start();
    await stack.healthy("GET /health answers 200", 300_000);
    const pids = stack.processes();
    supervisor.kill("SIGINT");
    supervisor.kill("SIGINT");
    expect(await exitWithin(supervisor, 60_000)).toBe(0);
    for (const name of ["web", "worker", "chain", "postgres"]) expect(alive(pids[name]!)).toBe(false);
    expect(stack.output).not.toMatch(/second signal/);
    expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"}/);
  }, 360_000);

  const postmasterFile = () => path.join(dataDir, "postgres", "postmaster.pid");
  const anvilFile = () => path.join(dataDir, "anvil", "anvil.pid");

  /**
   * The service is held where it starts (SIGSTOP) until the supervisor has either exited or said it waits for that
   * start: otherwise whether the start is still in progress when the signal comes is a matter of timing.
   */
  async function holdUntilShutdownDecided(pid: number): Promise<void> {
    try {
      await stack.until(
        "the supervisor exited or waiting for the start in progress",
        () => (supervisor!.exitCode !== null || /waiting for a start in progress/.test(stack.output) ? true : undefined),
        60_000,
      );
    } finally {
      signal([pid], "SIGCONT");
    }
  }

  it("stops the local chain it was starting when SIGTERM comes as soon as anvil.pid appears", async () => {
    stack.output = "";
    supervisor = stack.start();
    let anvil: number | undefined;
    try {
      // PostgreSQL and the migrations come first, then anvil is launched and the deployment checked.
      anvil = await soon("anvil.pid naming a live anvil", () => livePid(anvilFile()), 180_000);
      signal([anvil], "SIGSTOP");
      supervisor.kill("SIGTERM");
      await holdUntilShutdownDecided(anvil);
      // Before: "stopped", exit 0, and anvil still running (its parent now pid 1).
      expect(await exitWithin(supervisor, 60_000)).toBe(0);
      expect(alive(anvil)).toBe(false);
      expect(livePid(postmasterFile())).toBeUndefined();
      expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"}/);
    } finally {
      await killLeftovers(anvil ? [anvil] : []);
    }
  }, 240_000);

  it("stops the PostgreSQL it was starting when SIGTERM comes as soon as postmaster.pid appears", async () => {
    stack.output = "";
    supervisor = stack.start();
    let postmaster: number | undefined;
    try {
      postmaster = await soon("postmaster.pid naming a live postmaster", () => livePid(postmasterFile()), 60_000);
      signal([postmaster], "SIGSTOP");
      supervisor.kill("SIGTERM");
      await holdUntilShutdownDecided(postmaster);
      // Before: "stopped", exit 0, and the postmaster still running.
      expect(await exitWithin(supervisor, 60_000)).toBe(0);
      expect(alive(postmaster)).toBe(false);
      expect(existsSync(postmasterFile())).toBe(false);
      expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"}/);
    } finally {
      await killLeftovers(postmaster ? [postmaster] : []);
    }
  }, 120_000);

  it("stops within a bounded time on SIGTERM while PostgreSQL does not answer (SIGSTOPped), kills it, and exits 1", async () => {
    stack.output = "";
    supervisor = stack.start();
    let frozen: number[] = [];
    try {
      await stack.healthy("GET /health answers 200", 300_000);
      const pids = stack.processes();
      const postmaster = livePid(postmasterFile())!;
      frozen = [postmaster, ...childrenOf(postmaster)];
      signal(frozen, "SIGSTOP");
      const signalledAt = Date.now();
      supervisor.kill("SIGTERM");
      // Before: still running after 120 s (PostgreSQL's stop was awaited for ever), and exit 0 after a SIGCONT.
      // Now: the web server and the worker stop (the worker gives up on the database after 15 s), then PostgreSQL
      // gets its fast shutdown, SIGQUIT and SIGKILL, at most 30 s.
      expect(await exitWithin(supervisor, 100_000)).toBe(1);
      expect(Date.now() - signalledAt).toBeLessThan(100_000);
      for (const pid of [pids.web!, pids.worker!, pids.chain!, postmaster]) expect(alive(pid)).toBe(false);
      expect(stack.output).toMatch(/PostgreSQL did not stop/);
      expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"/);
    } finally {
      await killLeftovers(frozen);
    }
  }, 420_000);

  it("forces the exit at once on a second signal, killing what it started, and exits 1", async () => {
    stack.output = "";
    supervisor = stack.start();
    let frozen: number[] = [];
    try {
      // The last test killed PostgreSQL: this start recovers its data directory first.
      await stack.healthy("GET /health answers 200", 300_000);
      const pids = stack.processes();
      const postmaster = livePid(postmasterFile())!;
      frozen = [postmaster, ...childrenOf(postmaster)];
      signal(frozen, "SIGSTOP");
      supervisor.kill("SIGTERM");
      // Seconds after the first (a repeat within 250 ms is the same Ctrl-C, which npm forwards): once the web
      // server has stopped, the worker still waiting for the database.
      await stack.until("the web server stopped", () => (/"process":"web","exit"/.test(stack.output) ? true : undefined), 30_000);
      supervisor.kill("SIGINT");
      // Before: the second signal was ignored.
      expect(await exitWithin(supervisor, 10_000)).toBe(1);
      await stack.until("everything it started gone", () => ([pids.web!, pids.worker!, pids.chain!, ...frozen].some(alive) ? undefined : true), 10_000);
      expect(stack.output).toMatch(/second signal/);
      // Its own files removed on the way out, as by the orderly stop.
      expect(readdirSync(dataDir).filter((name) => name.startsWith("supervisor.") || name === "processes.json")).toEqual([]);
    } finally {
      await killLeftovers(frozen);
    }
  }, 420_000);
});
