import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "@/lib/log";

/**
 * `npm start` on a fresh clone must need no other step, so it builds the Next.js app when the build is missing or
 * older than its sources. The sources are fingerprinted by content (not mtimes, which a clone resets).
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const INPUT_DIRS = ["app", "lib", "db", "contracts/generated", "public"];
const INPUT_FILES = ["next.config.ts", "postcss.config.mjs", "tsconfig.json", "package-lock.json", "server.ts"];
const SKIP = /(\.test\.tsx?$|\.spec\.tsx?$|\/migrations\/)/;

function listFiles(dir: string): string[] {
  const full = path.join(ROOT, dir);
  if (!existsSync(full)) return [];
  const out: string[] = [];
  for (const entry of readdirSync(full, { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(rel));
    else if (entry.isFile() && !SKIP.test(rel)) out.push(rel);
  }
  return out;
}

export function sourceFingerprint(): string {
  const hash = createHash("sha256");
  const files = [...INPUT_DIRS.flatMap(listFiles), ...INPUT_FILES.filter((f) => existsSync(path.join(ROOT, f)))].sort();
  for (const file of files) {
    hash
      .update(file)
      .update("\0")
      .update(readFileSync(path.join(ROOT, file)))
      .update("\0");
  }
  return hash.digest("hex");
}

const stampFile = path.join(ROOT, ".next", "source-fingerprint");
const lockDir = path.join(ROOT, ".next-build.lock");

export function buildIsCurrent(fingerprint = sourceFingerprint()): boolean {
  return existsSync(path.join(ROOT, ".next", "BUILD_ID")) && existsSync(stampFile) && readFileSync(stampFile, "utf8") === fingerprint;
}

function lockHolderAlive(): boolean {
  try {
    const pid = Number(readFileSync(path.join(lockDir, "pid"), "utf8"));
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function acquireLock(logger: Logger): Promise<void> {
  for (let waited = 0; ; waited += 500) {
    try {
      mkdirSync(lockDir);
      writeFileSync(path.join(lockDir, "pid"), String(process.pid));
      return;
    } catch {
      // Another start is building; a lock left by a dead process is taken over.
      if (!lockHolderAlive() && statSync(lockDir, { throwIfNoEntry: false })) {
        rmSync(lockDir, { recursive: true, force: true });
        continue;
      }
      if (waited % 10_000 === 0) logger.info("waiting for another build of the web app to finish");
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

export async function buildIfStale(logger: Logger): Promise<void> {
  // Taken now, before the first await: npm start points TMPDIR into DATA_DIR while initdb runs (db/embedded.ts),
  // beside this build, and removes that directory afterwards: a build that inherited it would lose its temp files.
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  if (buildIsCurrent()) return;
  await acquireLock(logger);
  try {
    const fingerprint = sourceFingerprint();
    if (buildIsCurrent(fingerprint)) return;
    logger.info("building the web app (next build); this happens once after a change of the sources");
    const started = Date.now();
    const output: string[] = [];
    const code = await new Promise<number | null>((resolve, reject) => {
      const child = spawn(process.execPath, [path.join(ROOT, "node_modules", "next", "dist", "bin", "next"), "build"], {
        cwd: ROOT,
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      const keep = (chunk: Buffer) => {
        output.push(chunk.toString());
        if (output.length > 400) output.shift();
      };
      child.stdout.on("data", keep);
      child.stderr.on("data", keep);
      child.on("error", reject);
      child.on("exit", resolve);
    });
    if (code !== 0) {
      throw new Error(`next build failed (exit ${code}):\n${output.join("").split("\n").slice(-40).join("\n")}`);
    }
    writeFileSync(stampFile, fingerprint);
    logger.info("web app built", { seconds: Math.round((Date.now() - started) / 100) / 10 });
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
}
