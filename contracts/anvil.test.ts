import { mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freeSpace, fullDiskFile, until } from "@/test/full-disk";
import { keptLog } from "@/test/kept-log";
import { freePort } from "@/test/ports";
import { startAnvil } from "./anvil";

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-anvil-"));
});
afterAll(async () => rm(dataDir, { recursive: true, force: true }));

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
});
