import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freeSpace, fullDiskFile, until } from "@/test/full-disk";
import { keptLog } from "@/test/kept-log";
import { freePort } from "@/test/ports";
import { startAnvil, stateSaved } from "./anvil";

const ROOT = path.resolve(import.meta.dirname, "..");

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-anvil-"));
});
afterAll(async () => rm(dataDir, { recursive: true, force: true }));

/** The pids of the anvils whose cache is under `dir` (read from /proc: found however they were started). */
function anvilsUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (path.basename(argv[0] ?? "") === "anvil" && argv.includes(path.join(dir, "cache"))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

async function chainId(rpcUrl: string): Promise<string> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
  });
  return ((await res.json()) as { result: string }).result;
}

describe("startAnvil", () => {
  it("keeps the chain running while anvil.log cannot be written (a full disk), says so once, and writes the log again once it can", async () => {
    const dir = path.join(dataDir, "full-disk");
    await mkdir(dir);
    const logFile = path.join(dir, "anvil.log");
    await fullDiskFile(logFile);
    const { log: keep, lines: said } = keptLog();
    // Not quiet: anvil prints its banner and a line per RPC call.
    const anvil = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: dir, quiet: false, logger: keep });
    try {
      // Before: the log's write stream emitted an unhandled "error" (ENOSPC), which ended the process.
      await until(() => (said.some((line) => line.level === "warn") ? true : undefined));
      expect(await chainId(anvil.rpcUrl)).toBe("0x7a69");

      await freeSpace(logFile);
      await chainId(anvil.rpcUrl);
      await until(async () => ((await readFile(logFile, "utf8")).includes("eth_chainId") ? true : undefined));
      expect(anvil.process.exitCode).toBeNull();
    } finally {
      await anvil.stop();
    }
    expect(said.filter((line) => line.level === "warn").map((line) => line.msg)).toEqual([
      "cannot write the log file; its lines are dropped until it can be written again",
    ]);
    expect(said.some((line) => line.msg === "writing the log file again")).toBe(true);
  });

  it("says when anvil stopped without saving the chain's state (it exits 0 and prints nothing), and nothing when it saved it", async () => {
    const saved = path.join(dataDir, "state-saved");
    const lost = path.join(dataDir, "state-lost");
    await mkdir(saved);
    await mkdir(lost);
    const first = keptLog();
    const kept = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: saved, persistState: true, logger: first.log });
    expect(await kept.stop()).toBe(true);
    expect(stateSaved(path.join(saved, "state.json"), 0)).toBe("saved");
    expect(first.lines.filter((l) => l.level === "error")).toEqual([]);

    const second = keptLog();
    const anvil = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: lost, persistState: true, logger: second.log });
    // Its directory removed while it runs: the dump at the stop cannot be written.
    await rm(lost, { recursive: true, force: true });
    expect(await anvil.stop()).toBe(true);
    expect(anvil.process.exitCode).toBe(0);
    expect(second.lines.filter((l) => l.level === "error").map((l) => l.msg)).toEqual([
      "anvil stopped without saving the chain's state: no state file was written, so the next start begins a fresh chain",
    ]);
  });

  it("tells a whole dump written since the stop from one cut short (a full disk: written in place) and from an older one", async () => {
    const dir = path.join(dataDir, "state-kinds");
    await mkdir(dir);
    const file = path.join(dir, "state.json");
    expect(stateSaved(file, 0)).toBe("absent");
    await writeFile(file, '{"block":{"number":"0x1"},"accounts":{}}\n');
    const written = statSync(file).mtimeMs;
    expect(stateSaved(file, written)).toBe("saved");
    expect(stateSaved(file, written + 1_000)).toBe("not_written");
    await writeFile(file, '{"block":{"number":"0x1"},"accou');
    expect(stateSaved(file, 0)).toBe("truncated");
    // Cut right after a nested object's brace: it ends with "}" and still does not parse.
    await writeFile(file, '{"block":{"number":"0x1"}');
    expect(stateSaved(file, 0)).toBe("truncated");
    // An older dump cut short is no last save to load either.
    expect(stateSaved(file, Date.now() + 60_000)).toBe("truncated");
    await writeFile(file, "");
    expect(stateSaved(file, 0)).toBe("truncated");
  });

  it("keeps anvil.log readable by its owner alone (0600), tightening one an older start created 0644", async () => {
    const fresh = path.join(dataDir, "log-mode-fresh");
    const older = path.join(dataDir, "log-mode-older");
    await mkdir(fresh);
    await mkdir(older);
    await writeFile(path.join(older, "anvil.log"), "", { mode: 0o644 });
    for (const dir of [fresh, older]) {
      const anvil = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: dir });
      await anvil.stop();
      // Before: 0644 (the default under umask 022), and an existing file kept its mode.
      expect((statSync(path.join(dir, "anvil.log")).mode & 0o777).toString(8)).toBe("600");
    }
  });

  it("fails the start and leaves no anvil running when its pid file cannot be written (a full disk)", async () => {
    const dir = path.join(dataDir, "pid-file-full");
    await mkdir(dir);
    const pidFile = await fullDiskFile(path.join(dir, "anvil.pid"));
    try {
      const error = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: dir, pidFile }).catch((e: unknown) => e);
      expect((error as Error).message).toMatch(/^anvil's pid file .* could not be written: ENOSPC/);
      // Before: the start failed with the write's error and anvil ran on, recorded nowhere.
      await until(() => (anvilsUnder(dir).length === 0 ? true : undefined), 5_000);
    } finally {
      for (const pid of anvilsUnder(dir)) process.kill(pid, "SIGKILL");
    }
  });

  it("fails the start with the spawn's error when anvil cannot be spawned (no descriptor left: EMFILE), instead of ending the process", async () => {
    const dir = path.join(dataDir, "no-descriptors");
    await mkdir(dir);
    // In a process of its own whose file descriptors are all taken: the spawn fails with EMFILE, which comes as an
    // "error" event (npm start's supervisor would have ended on it unhandled).
    const script = `
      import { openSync } from "node:fs";
      const { anvilBinary, startAnvil } = await import(${JSON.stringify(path.join(ROOT, "contracts", "anvil.ts"))});
      anvilBinary(); // resolved while files can still be opened
      try {
        for (;;) openSync("/dev/null", "r");
      } catch {}
      const outcome = await startAnvil({ port: ${await freePort()}, blockTime: 0, dataDir: ${JSON.stringify(dir)} }).then(
        () => "started",
        (error) => error.message,
      );
      process.stdout.write("outcome: " + outcome + "\\n", () => process.exit(0));`;
    const child = spawn("bash", ["-c", 'ulimit -n 256 && exec "$0" "$@"', process.execPath, "--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code, output).toBe(0);
    expect(output).toMatch(/outcome: anvil could not be started: spawn \S+ EMFILE/);
  });
});
