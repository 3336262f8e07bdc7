import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ignoredEnvFiles } from "./env-files";

/**
 * Next.js loads a directory's .env files into the process that creates its server (server.ts) or runs `next build`
 * (next/dist/server/config.js calls @next/env's loadEnvConfig(dir)). Here that same call, from the installed Next.js,
 * in a process of its own over a directory with a .env: as server.ts does it (keepNextFromEnvFiles first), the file is
 * not loaded; without it, it is (which is what handed a .env's DEPLOYER_PRIVATE_KEY to the web server). An upgrade of
 * Next.js that stops honouring the mark fails the first case.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const dir = mkdtempSync(path.join(tmpdir(), "env-files-"));
const KEY = `0x${"ab".repeat(32)}`;
writeFileSync(path.join(dir, ".env"), `DEPLOYER_PRIVATE_KEY=${KEY}\n`);
writeFileSync(path.join(dir, ".env.local"), "LOG_LEVEL=debug\n");

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** process.env's DEPLOYER_PRIVATE_KEY after Next's loadEnvConfig(dir) in a fresh process, with or without the mark. */
function loadedKey(marked: boolean): string {
  const script = `
    ${marked ? 'require("./lib/env-files.ts").keepNextFromEnvFiles();' : ""}
    require("@next/env").loadEnvConfig(${JSON.stringify(dir)}, false, { info() {}, error() {} });
    process.stdout.write(process.env.DEPLOYER_PRIVATE_KEY ?? "unset");`;
  const env = { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" } as unknown as NodeJS.ProcessEnv;
  return execFileSync(process.execPath, ["--import", "tsx", "-e", script], { cwd: ROOT, env, encoding: "utf8" });
}

describe(".env files", () => {
  it("are not loaded by Next.js into a process that called keepNextFromEnvFiles (server.ts, next build)", () => {
    expect(loadedKey(true)).toBe("unset");
  });

  it("would be, without it", () => {
    expect(loadedKey(false)).toBe(KEY);
  });

  it("are named for npm start's warning", () => {
    expect(ignoredEnvFiles(dir)).toEqual([".env.local", ".env"]);
    expect(ignoredEnvFiles(ROOT).includes(".env.example")).toBe(false);
  });
});
