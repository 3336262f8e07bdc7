import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fullDiskFile } from "@/test/full-disk";
import { writeFileDurably } from "./durable-file";

/**
 * A file written whole or not at all (the administrator token, the embedded database's credentials, the local
 * deployment record). Until session 26 the administrator token was written in place: a full disk left an empty
 * admin-token, which every later `npm start` refused ("it is empty; delete the file").
 */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dir(): string {
  const d = mkdtempSync(path.join(tmpdir(), "durable-"));
  dirs.push(d);
  return d;
}

describe("writeFileDurably", () => {
  it("writes the content with the mode asked, replacing what was there", () => {
    const file = path.join(dir(), "admin-token");
    writeFileSync(file, "old\n", { mode: 0o644 });
    writeFileDurably(file, "new\n", 0o600);
    expect(readFileSync(file, "utf8")).toBe("new\n");
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("leaves no file, and nothing beside it, when the disk is full; writes it once there is space", async () => {
    const file = path.join(dir(), "admin-token");
    // The temporary file's writes fail as on a full disk (ENOSPC).
    const tmp = await fullDiskFile(`${file}.${process.pid}.tmp`);
    expect(() => writeFileDurably(file, "token\n")).toThrow(/ENOSPC/);
    expect(existsSync(file)).toBe(false);
    expect(existsSync(tmp)).toBe(false);

    writeFileDurably(file, "token\n");
    expect(readFileSync(file, "utf8")).toBe("token\n");
  });

  it("keeps the old content when the new one cannot be written", async () => {
    const file = path.join(dir(), "deployment.json");
    writeFileDurably(file, '{"old":true}\n', 0o644);
    await fullDiskFile(`${file}.${process.pid}.tmp`);
    expect(() => writeFileDurably(file, '{"new":true}\n', 0o644)).toThrow(/ENOSPC/);
    expect(readFileSync(file, "utf8")).toBe('{"old":true}\n');
  });
});
