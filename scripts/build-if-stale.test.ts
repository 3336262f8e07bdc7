import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processAlive, processIdentity } from "@/lib/process-alive";
import { spawn } from "node:child_process";
import { keptLog } from "@/test/kept-log";
import { acquireBuildLock, BuildStoppedError, releaseBuildLock, runNextBuild } from "./build-if-stale";

/**
 * The web app's build as `npm start` runs it (scripts/build-if-stale.ts), with a stand-in for `next build` in a
 * temporary project: a process that starts a worker of its own (as `next build` does for page data) and runs until
 * it is stopped. The real build takes minutes and is what every other test needs intact.
 */

let root: string;
let runs = 0;
let pidsFile = "";

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "build-stop-"));
  const bin = path.join(root, "node_modules", "next", "dist", "bin");
  mkdirSync(bin, { recursive: true });
  writeFileSync(
    path.join(bin, "next"),
    `const { spawn } = require("node:child_process");
     const { writeFileSync } = require("node:fs");
     // A worker that ignores SIGTERM: only the group's SIGKILL, once the build has exited, ends it.
     const worker = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000)"], { stdio: "ignore" });
     const { renameSync } = require("node:fs");
     if (process.env.IGNORE_SIGTERM === "1") process.on("SIGTERM", () => {});
     // Written whole (a reader never sees it half-written).
     writeFileSync(process.env.PIDS_FILE + ".tmp", JSON.stringify([process.pid, worker.pid]));
     renameSync(process.env.PIDS_FILE + ".tmp", process.env.PIDS_FILE);
     if (process.env.BUILD_EXIT === "0") setTimeout(() => process.exit(0), 50);
     else setInterval(() => {}, 1000);`,
  );
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Gone, or a zombie waiting for a reaper that is not ours (it runs nothing any more). */
function gone(pid: number): boolean {
  if (!processAlive(pid)) return true;
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? false;
  } catch {
    return true;
  }
}

/** A pids file of its own for each build the test starts. */
function nextPidsFile(): string {
  pidsFile = path.join(root, `pids-${++runs}.json`);
  return pidsFile;
}

async function pidsOfBuild(): Promise<number[]> {
  for (let i = 0; i < 200 && !existsSync(pidsFile); i++) await new Promise((r) => setTimeout(r, 25));
  return JSON.parse(readFileSync(pidsFile, "utf8")) as number[];
}

describe("the web app's build under npm start (scripts/build-if-stale.ts)", () => {
  it("stops the whole build when its signal aborts, workers included, and answers only once it has exited", async () => {
    const stop = new AbortController();
    const build = runNextBuild({ ...process.env, PIDS_FILE: nextPidsFile() }, { signal: stop.signal, root });
    const pids = await pidsOfBuild();
    expect(pids.every((pid) => !gone(pid))).toBe(true);
    stop.abort();
    await expect(build).rejects.toBeInstanceOf(BuildStoppedError);
    // The group's last kill is sent as the build's exit is seen: its worker is on its way out at once.
    for (let i = 0; i < 200 && !pids.every(gone); i++) await new Promise((r) => setTimeout(r, 25));
    expect(pids.filter((pid) => !gone(pid))).toEqual([]);
  });

  it("a build that ends by itself answers its exit code, and leaves no worker of its own behind", async () => {
    const build = await runNextBuild({ ...process.env, PIDS_FILE: nextPidsFile(), BUILD_EXIT: "0" }, { signal: new AbortController().signal, root });
    expect(build.code).toBe(0);
    const pids = JSON.parse(readFileSync(pidsFile, "utf8")) as number[];
    for (let i = 0; i < 200 && !pids.every(gone); i++) await new Promise((r) => setTimeout(r, 25));
    expect(pids.filter((pid) => !gone(pid))).toEqual([]);
  });

  it("kills a stopped build that ignores SIGTERM once its grace has passed", async () => {
    const stop = new AbortController();
    const build = runNextBuild({ ...process.env, PIDS_FILE: nextPidsFile(), IGNORE_SIGTERM: "1" }, { signal: stop.signal, root, stopGraceMs: 300 });
    const pids = await pidsOfBuild();
    stop.abort();
    await expect(build).rejects.toBeInstanceOf(BuildStoppedError);
    for (let i = 0; i < 200 && !pids.every(gone); i++) await new Promise((r) => setTimeout(r, 25));
    expect(pids.filter((pid) => !gone(pid))).toEqual([]);
  });

  it("does not start a build whose signal has already aborted", async () => {
    const stop = new AbortController();
    stop.abort();
    await expect(runNextBuild(process.env, { signal: stop.signal, root })).rejects.toBeInstanceOf(BuildStoppedError);
  });
});

describe("the build lock (scripts/build-if-stale.ts)", () => {
  /** A lock directory as a start leaves it: `records` by file name. */
  const lockWith = (name: string, records: Record<string, string>): string => {
    const dir = path.join(root, name);
    mkdirSync(dir);
    for (const [file, text] of Object.entries(records)) writeFileSync(path.join(dir, file), text);
    return dir;
  };
  const mine = () => processIdentity(process.pid);

  it("takes over a lock whose holder is gone, was another process under the same pid, or left no readable record", async () => {
    const { log } = keptLog();
    for (const [name, records] of [
      ["dead", { pid: "999999999" }],
      // The same pid as a process alive now (this one), with another start time: a container started again.
      ["reused", { pid: `${process.pid} 1` }],
      ["empty", { pid: "" }],
      ["garbage", { pid: "not a pid" }],
      ["none", {}],
    ] as const) {
      const dir = lockWith(`lock-${name}`, records);
      await acquireBuildLock(dir, log, undefined);
      expect(readFileSync(path.join(dir, "pid"), "utf8")).toBe(mine());
      releaseBuildLock(dir);
      expect(existsSync(dir)).toBe(false);
    }
    // Nothing left beside them (the fresh and the stale directories are the lock's own).
    expect(readdirSync(root).filter((f) => f.startsWith("lock-"))).toEqual([]);
  });

  it("waits while the holder, or the build it started, is alive, and stops waiting when its signal aborts", async () => {
    const sleeper = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    try {
      await new Promise((resolve) => sleeper.once("spawn", resolve));
      const alive = processIdentity(sleeper.pid!);
      for (const [name, records] of [
        ["held", { pid: alive }],
        // A holder killed outright whose build still runs.
        ["building", { pid: "999999999", "build-pid": alive }],
      ] as const) {
        const dir = lockWith(`lock-${name}`, records);
        const stop = new AbortController();
        const { log, lines } = keptLog();
        const acquired = acquireBuildLock(dir, log, stop.signal);
        // It waits: it said so, and the lock is still the other one's.
        for (let i = 0; i < 200 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
        expect(lines.map((l) => l.msg)).toEqual(["waiting for another build of the web app to finish"]);
        expect(readFileSync(path.join(dir, "pid"), "utf8")).toBe(records.pid);
        stop.abort();
        await expect(acquired).rejects.toBeInstanceOf(BuildStoppedError);
        // Another's lock is never given back by this process.
        releaseBuildLock(dir);
        expect(readFileSync(path.join(dir, "pid"), "utf8")).toBe(records.pid);
      }
    } finally {
      sleeper.kill("SIGKILL");
    }
  });
});
