import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "./log";
import { openLogFile } from "./log-file";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const scratch = () => {
  const dir = mkdtempSync(path.join(tmpdir(), "log-file-"));
  dirs.push(dir);
  return dir;
};
const logger = createLogger({ component: "log-file-test" });

describe("a child's log file is rotated by size (lib/log-file.ts)", () => {
  it("keeps each file within maxBytes, whole lines in order, the newest `keep` files, each the owner's alone", () => {
    const dir = scratch();
    const file = path.join(dir, "web.log");
    const log = openLogFile(file, logger, { maxBytes: 1_000, keep: 3 });
    const lines = Array.from({ length: 100 }, (_, i) => `${JSON.stringify({ n: i, msg: "x".repeat(60) })}\n`);
    for (const line of lines) log.write(line);
    log.close();

    // Before: one file of 7.7 KB, growing for as long as the service ran.
    expect(readdirSync(dir).sort()).toEqual(["web.log", "web.log.1", "web.log.2", "web.log.3"]);
    const files = ["web.log.3", "web.log.2", "web.log.1", "web.log"].map((f) => path.join(dir, f));
    for (const f of files) {
      expect(statSync(f).size).toBeLessThanOrEqual(1_000);
      expect(statSync(f).mode & 0o777).toBe(0o600);
    }
    // What is kept is the end of the output, in order, no line split.
    const kept = files.map((f) => readFileSync(f, "utf8")).join("");
    expect(lines.join("").endsWith(kept)).toBe(true);
    expect(kept.startsWith("{")).toBe(true);
  });

  it("rotates a file that an older version left past the limit before it writes to it", () => {
    const dir = scratch();
    const file = path.join(dir, "worker.log");
    writeFileSync(file, "old\n".repeat(1_000), { mode: 0o600 });
    const log = openLogFile(file, logger, { maxBytes: 1_000, keep: 2 });
    log.write("new\n");
    log.close();
    expect(readFileSync(file, "utf8")).toBe("new\n");
    expect(statSync(`${file}.1`).size).toBe(4_000);
  });

  it("never rotates a device it writes to (/dev/null)", () => {
    const log = openLogFile("/dev/null", logger, { maxBytes: 10, keep: 1 });
    for (let i = 0; i < 10; i++) log.write("0123456789\n");
    log.close();
    expect(statSync("/dev/null").isCharacterDevice()).toBe(true);
  });
});
