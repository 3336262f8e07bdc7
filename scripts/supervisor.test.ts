import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@/lib/log";
import { freeSpace, fullDiskFile, until } from "@/test/full-disk";
import { keptLog } from "@/test/kept-log";
import { spawn } from "node:child_process";
import { openLogFile } from "@/lib/log-file";
import { processAlive } from "@/lib/process-alive";
import { describeExit, supervise, superviseService, type ServiceHandle } from "./supervisor";

const logger = createLogger({ test: "supervisor" });
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "supervisor-test-"));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** A log file on a full disk (test/full-disk.ts). */
const fullDiskLog = (name: string) => fullDiskFile(path.join(dir, name));

describe("supervise", () => {
  it("restarts a child killed with SIGKILL and logs why", async () => {
    const pids: number[] = [];
    const child = supervise({
      name: "sleeper",
      command: process.execPath,
      args: ["-e", "setInterval(() => {}, 1000)"],
      env: process.env,
      cwd: dir,
      logger,
      minBackoffMs: 50,
      onStart: (pid) => pids.push(pid),
    });
    const first = await until(() => pids[0]);
    process.kill(first, "SIGKILL");
    const second = await until(() => pids[1]);
    expect(second).not.toBe(first);
    expect(child.restarts).toBe(1);
    await child.stop();
    expect(child.pid).toBeUndefined();
  });

  it("backs off exponentially while a child keeps crashing, then stops cleanly", async () => {
    const starts: number[] = [];
    const child = supervise({
      name: "crasher",
      command: process.execPath,
      args: ["-e", "process.exit(3)"],
      env: process.env,
      cwd: dir,
      logger,
      minBackoffMs: 40,
      maxBackoffMs: 400,
      onStart: () => starts.push(Date.now()),
    });
    await until(() => (starts.length >= 4 ? true : undefined));
    await child.stop();
    const gaps = starts.slice(1).map((t, i) => t - starts[i]!);
    // Each wait is at least the backoff for that restart: 40, 80, 160 ms.
    expect(gaps[0]).toBeGreaterThanOrEqual(40);
    expect(gaps[1]).toBeGreaterThanOrEqual(80);
    expect(gaps[2]).toBeGreaterThanOrEqual(160);
    const count = starts.length;
    await new Promise((r) => setTimeout(r, 500));
    expect(starts.length).toBe(count);
  });

  it("asks a child to stop with SIGTERM and writes its output to the log file, the last line too", async () => {
    const logFile = path.join(dir, "graceful.log");
    const child = supervise({
      name: "graceful",
      command: process.execPath,
      // The handler is in place before "ready" is written: a SIGTERM that came between the two would kill it.
      args: ["-e", "process.on('SIGTERM', () => process.stdout.write('drained\\n', () => process.exit(0))); console.log('ready'); setInterval(() => {}, 1000)"],
      env: process.env,
      cwd: dir,
      logger,
      logFile,
    });
    await until(async () => ((await readFile(logFile, "utf8").catch(() => "")).includes("ready") ? true : undefined));
    await child.stop();
    expect(await readFile(logFile, "utf8")).toBe("ready\ndrained\n");
    expect(child.restarts).toBe(0);
  });

  it("keeps what is still written to a child's pipes after it exited (a grandchild holding them) when stopped then", async () => {
    const logFile = path.join(dir, "late.log");
    const child = supervise({
      name: "parent",
      command: process.execPath,
      args: [
        "-e",
        "require('child_process').spawn(process.execPath, ['-e', \"setTimeout(() => console.log('late'), 300)\"], { stdio: 'inherit' }).unref(); console.log('early')",
      ],
      env: process.env,
      cwd: dir,
      logger,
      logFile,
      // No restart before the test stops it.
      minBackoffMs: 60_000,
    });
    await until(() => (child.restarts === 1 ? true : undefined));
    await child.stop();
    expect(await readFile(logFile, "utf8")).toBe("early\nlate\n");
  });

  it("keeps a child running while its log file cannot be written (a full disk), says so once, and writes its lines again once it can", async () => {
    const logFile = await fullDiskLog("full-disk.log");
    const { log: keep, lines: said } = keptLog();
    const pids: number[] = [];
    const child = supervise({
      name: "chatty",
      command: process.execPath,
      args: ["-e", "let i = 0; setInterval(() => console.log('line ' + i++), 10)"],
      env: process.env,
      cwd: dir,
      logger: keep,
      logFile,
      onStart: (pid) => pids.push(pid),
    });
    try {
      await until(() => (said.some((line) => line.level === "warn") ? true : undefined));
      await freeSpace(logFile);
      // Before: the write stream's ENOSPC was an unhandled "error" event (the supervisor's crash handler then stopped it all).
      const written = await until(async () => {
        const text = await readFile(logFile, "utf8");
        return text.split("\n").length > 3 ? text : undefined;
      });
      // What came after the outage is all there, in order.
      const numbers = written
        .trim()
        .split("\n")
        .map((line) => Number(/^line (\d+)$/.exec(line)?.[1]));
      expect(numbers.slice(1)).toEqual(numbers.slice(0, -1).map((n) => n + 1));
      expect(numbers[0]).toBeGreaterThan(0);
    } finally {
      await child.stop();
    }
    expect(said.filter((line) => line.level === "warn").map((line) => [line.msg, (line.fields?.error as NodeJS.ErrnoException).code])).toEqual([
      ["cannot write the log file; its lines are dropped until it can be written again", "ENOSPC"],
    ]);
    expect(said.find((line) => line.msg === "writing the log file again")?.fields?.droppedBytes).toBeGreaterThan(0);
    expect(child.restarts).toBe(0);
    expect(pids).toHaveLength(1);
  });

  it("retries a child that could not be spawned (its command missing: ENOENT) with backoff, and runs it once it can", async () => {
    const command = path.join(dir, "appears-later");
    const { log, lines } = keptLog();
    const pids: number[] = [];
    const child = supervise({ name: "late", command, args: [], env: process.env, cwd: dir, logger: log, minBackoffMs: 50, onStart: (pid) => pids.push(pid) });
    try {
      // Before: one "could not start", and the child stayed down for good.
      await until(() => (lines.filter((line) => line.msg === "could not start").length >= 2 ? true : undefined));
      await writeFile(command, "#!/bin/sh\nexec sleep 600\n", { mode: 0o755 });
      const pid = await until(() => pids[0]);
      expect(processAlive(pid)).toBe(true);
    } finally {
      await child.stop();
    }
    expect(child.pid).toBeUndefined();
  });

  it("describes how a process ended", () => {
    expect(describeExit(null, "SIGKILL")).toBe("killed by SIGKILL");
    expect(describeExit(2, null)).toBe("exited with code 2");
  });
});

describe("openLogFile", () => {
  it("drops what it cannot write (a full disk), warns once with the error, and appends again once it can", async () => {
    const file = await fullDiskLog("dropped.log");
    const { log: keep, lines: said } = keptLog();
    const log = openLogFile(file, keep);
    log.write("first\n");
    log.write(Buffer.from("second\n"));
    expect(said.map((line) => [line.level, line.msg])).toEqual([["warn", "cannot write the log file; its lines are dropped until it can be written again"]]);
    expect((said[0]?.fields?.error as NodeJS.ErrnoException).code).toBe("ENOSPC");

    await freeSpace(file);
    log.write("third\n");
    log.write("fourth\n");
    log.close();
    log.write("after close\n");
    expect(await readFile(file, "utf8")).toBe("third\nfourth\n");
    expect(said.slice(1)).toEqual([{ level: "info", msg: "writing the log file again", fields: { file, droppedBytes: 13 } }]);
  });
});

/** A service as start.ts sees one: a process it started, watched by its exit. */
function sleeperService(): ServiceHandle {
  const proc = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  return {
    pid: proc.pid!,
    exited,
    stop: async () => {
      proc.kill("SIGTERM");
      await exited;
      return true;
    },
  };
}

describe("superviseService", () => {
  it("starts a killed service again, retrying a restart that fails, and stops the running one", async () => {
    const first = sleeperService();
    let attempts = 0;
    const started: number[] = [];
    const service = superviseService({
      name: "database",
      logger,
      first,
      minBackoffMs: 20,
      restart: async () => {
        attempts += 1;
        if (attempts === 1) throw new Error("port still held");
        return sleeperService();
      },
      onStart: (pid) => started.push(pid),
    });
    process.kill(first.pid, "SIGKILL");
    const second = await until(() => started[0]);
    expect(second).not.toBe(first.pid);
    expect(attempts).toBe(2);
    expect(service.restarts).toBe(1);
    await service.stop();
    expect(() => process.kill(second, 0)).toThrow();
  });

  it("does not start a service again that went while its caller was shutting down (Ctrl-C reaches the whole group)", async () => {
    const first = sleeperService();
    let restarts = 0;
    let shuttingDown = false;
    const { log: keep, lines: said } = keptLog();
    const service = superviseService({
      name: "database",
      logger: keep,
      first,
      minBackoffMs: 20,
      restart: async () => {
        restarts += 1;
        return sleeperService();
      },
      keepRunning: () => !shuttingDown,
    });
    shuttingDown = true;
    process.kill(first.pid, "SIGINT");
    // What the supervisor made of the exit (before: "exited unexpectedly; restarting", and a restart).
    expect(await until(() => said.find((line) => line.msg.startsWith("exited"))?.msg)).toBe("exited while shutting down; not restarted");
    // stop() returns though the service had gone by itself, and nothing was started.
    await service.stop();
    expect(restarts).toBe(0);
  });

  it("tries no more restarts once its caller is shutting down, whose shutdown cut the restart in progress short", async () => {
    const first = sleeperService();
    let attempts = 0;
    let shuttingDown = false;
    const { log: keep, lines: said } = keptLog();
    const service = superviseService({
      name: "database",
      logger: keep,
      first,
      minBackoffMs: 20,
      restart: async () => {
        attempts += 1;
        // npm start's shutdown begins, and stops the PostgreSQL start in progress (PostgresStartStoppedError).
        shuttingDown = true;
        throw new Error("PostgreSQL's start was stopped");
      },
      keepRunning: () => !shuttingDown,
    });
    process.kill(first.pid, "SIGKILL");
    expect(await until(() => said.find((line) => line.msg === "restart cut short by the shutdown")?.msg)).toBeDefined();
    await until(() => (said.some((line) => line.msg === "not restarted: shutting down") ? true : undefined));
    expect(await service.stop()).toBe(true);
    // Before: "could not restart; retrying" at error level and another start, until the caller came to stop it.
    expect(attempts).toBe(1);
    expect(said.filter((line) => line.msg === "could not restart; retrying")).toEqual([]);
  });

  it("stopped while a restart is in progress, waits for it, stops what it started, and answers how that stop went", async () => {
    const first = sleeperService();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { log: keep } = keptLog();
    let next: ServiceHandle | undefined;
    let restarting = false;
    const service = superviseService({
      name: "database",
      logger: keep,
      first,
      minBackoffMs: 20,
      restart: async () => {
        restarting = true;
        await gate;
        const sleeper = sleeperService();
        // It had to be forced (a PostgreSQL that ignored its fast shutdown).
        next = { ...sleeper, stop: async () => (await sleeper.stop(), false) };
        return next;
      },
    });
    process.kill(first.pid, "SIGKILL");
    // The restart has begun (past its backoff) and waits at the gate.
    await until(() => (restarting ? true : undefined));
    const stopping = service.stop();
    release();
    // Before: true, as if nothing had run (the restarted instance's stop was awaited and its answer dropped).
    expect(await stopping).toBe(false);
    expect(processAlive(next!.pid)).toBe(false);
  });

  it("stopped while a restart never finishes, answers false after startWaitMs instead of waiting for ever", async () => {
    const first = sleeperService();
    const { log: keep, lines: said } = keptLog();
    let restarting = false;
    const service = superviseService({
      name: "database",
      logger: keep,
      first,
      minBackoffMs: 20,
      startWaitMs: 300,
      restart: () => ((restarting = true), new Promise<ServiceHandle>(() => {})),
    });
    process.kill(first.pid, "SIGKILL");
    await until(() => (restarting ? true : undefined));
    // Before: stop() never returned (the loop awaited the restart without a bound).
    expect(await Promise.race([service.stop(), new Promise((resolve) => setTimeout(() => resolve("no answer in 5 s"), 5_000))])).toBe(false);
    expect(said.map((line) => line.msg)).toContain("still restarting after 0.3 s; left to the caller to kill");
  });
});
