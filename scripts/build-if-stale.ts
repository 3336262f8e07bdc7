import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "@/lib/log";

/**
 * `npm start` on a fresh clone must need no other step, so it builds the Next.js app when the build is missing or
 * older than its sources. The sources are fingerprinted by content (not mtimes, which a clone resets).
 *
 * With a `signal` (npm start's) the build runs in a process group of its own, which the signal stops whole (`next
 * build` and the workers it starts), and the promise settles only once it has exited: a supervisor stopped or
 * failing during its first start leaves no build behind. The lock names its holder and the build: a holder killed
 * outright (SIGKILL, no cleanup) frees it only once its build has ended too, so the next start never builds over a
 * running one.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
/** How long a stopped build is given after SIGTERM before its process group is killed. */
const BUILD_STOP_GRACE_MS = 5_000;
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

/** The lock's holder (a start, or a test) is alive, or the build it started is: the lock is not free. */
function lockHolderAlive(): boolean {
  const alive = (file: string) => {
    try {
      const pid = Number(readFileSync(path.join(lockDir, file), "utf8"));
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  // A build outlives a holder killed with SIGKILL: the next start waits for it rather than build over it.
  return alive("pid") || alive("build-pid");
}

async function acquireLock(logger: Logger, signal: AbortSignal | undefined): Promise<void> {
  for (let waited = 0; ; waited += 500) {
    if (signal?.aborted) throw new BuildStoppedError("stopped while waiting for another build of the web app");
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

export class BuildStoppedError extends Error {
  override name = "BuildStoppedError";
}

/**
 * `next build`, from `root` (ROOT; a test points it elsewhere). With a `signal` it runs in a process group of its
 * own, which the signal stops (SIGTERM, then SIGKILL after `stopGraceMs`) and which is killed once the build has
 * exited, so no worker it started outlives it; the answer waits for the build's exit and its output. Without one
 * (the tests' builds) it stays in its caller's group, where a terminal's Ctrl-C reaches it.
 */
export function runNextBuild(
  env: NodeJS.ProcessEnv,
  options: { signal?: AbortSignal; root?: string; stopGraceMs?: number; onStart?: (pid: number) => void } = {},
): Promise<{ code: number | null; output: string }> {
  const root = options.root ?? ROOT;
  const { signal } = options;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new BuildStoppedError("the web app's build was stopped before it started"));
    const output: string[] = [];
    const child = spawn(process.execPath, [path.join(root, "node_modules", "next", "dist", "bin", "next"), "build"], {
      cwd: root,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: signal !== undefined,
    });
    if (child.pid) options.onStart?.(child.pid);
    const keep = (chunk: Buffer) => {
      output.push(chunk.toString());
      if (output.length > 400) output.shift();
    };
    const group = (sig: NodeJS.Signals) => {
      try {
        if (signal && child.pid) process.kill(-child.pid, sig);
      } catch {
        // the group is gone already
      }
    };
    let stopped = false;
    let killTimer: NodeJS.Timeout | undefined;
    const stop = () => {
      stopped = true;
      group("SIGTERM");
      killTimer = setTimeout(() => group("SIGKILL"), options.stopGraceMs ?? BUILD_STOP_GRACE_MS);
    };
    signal?.addEventListener("abort", stop, { once: true });
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", reject);
    // The workers it started share its group: none outlives it (and none keeps its output open).
    child.on("exit", () => {
      group("SIGKILL");
      // A process it left holding its output (outside the group) must not hold the answer back.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
      }, 2_000).unref();
    });
    // Settled once its output is complete too (a failed build's error is at its end).
    child.on("close", (code) => {
      signal?.removeEventListener("abort", stop);
      clearTimeout(killTimer);
      if (stopped) reject(new BuildStoppedError("the web app's build was stopped"));
      else resolve({ code, output: output.join("") });
    });
  });
}

export async function buildIfStale(logger: Logger, options: { signal?: AbortSignal } = {}): Promise<void> {
  // Taken now, before the first await: npm start points TMPDIR into DATA_DIR while initdb runs (db/embedded.ts),
  // beside this build, and removes that directory afterwards: a build that inherited it would lose its temp files.
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  if (buildIsCurrent()) return;
  await acquireLock(logger, options.signal);
  try {
    const fingerprint = sourceFingerprint();
    if (buildIsCurrent(fingerprint)) return;
    logger.info("building the web app (next build); this happens once after a change of the sources");
    const started = Date.now();
    const { code, output } = await runNextBuild(env, {
      signal: options.signal,
      onStart: (pid) => writeFileSync(path.join(lockDir, "build-pid"), String(pid)),
    });
    if (code !== 0) {
      throw new Error(`next build failed (exit ${code}):\n${output.split("\n").slice(-40).join("\n")}`);
    }
    writeFileSync(stampFile, fingerprint);
    logger.info("web app built", { seconds: Math.round((Date.now() - started) / 100) / 10 });
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
}
