import { spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { keepNextFromEnvFiles } from "@/lib/env-files";
import type { Logger } from "@/lib/log";
import { processIdentity, recordedProcess } from "@/lib/process-alive";

/**
 * `npm start` on a fresh clone must need no other step, so it builds the Next.js app when the build is missing or
 * older than its sources. The sources are fingerprinted by content (not mtimes, which a clone resets).
 *
 * With a `signal` (npm start's) the build runs in a process group of its own, which the signal stops whole (`next
 * build` and the workers it starts), and the promise settles only once it has exited: a supervisor stopped or
 * failing during its first start leaves no build behind. One build at a time (`.next-build.lock`, acquireBuildLock):
 * the lock names its holder and the build, each by pid and start time, so a holder killed outright (SIGKILL, no
 * cleanup) frees it only once its build has ended too, and a pid given to another process since frees it at once.
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

/** Whether the process a lock file names is still that process; an empty or unreadable record names none. */
const recordedAlive = (record: string | undefined): boolean => recordedProcess(record).alive;

function readRecord(dir: string, file: string): string | undefined {
  try {
    return readFileSync(path.join(dir, file), "utf8");
  } catch {
    return undefined;
  }
}

/** The lock's holder (a start, or a test) is alive, or the build it started is: the lock is not free. */
function lockHeld(dir: string): boolean {
  // A build outlives a holder killed with SIGKILL: the next start waits for it rather than build over it.
  return recordedAlive(readRecord(dir, "pid")) || recordedAlive(readRecord(dir, "build-pid"));
}

/**
 * Takes the build lock `dir` (a directory holding the holder's record). It appears whole, record included (made
 * beside it, then renamed into place: a rename onto a directory that is not empty fails), so no other start ever
 * sees it without its holder. A lock whose holder and build are gone is moved aside under a name of its own, read
 * again there (it must still be the dead one: another start may have taken the lock meanwhile, which is put back),
 * and removed. Waits while the lock is held; ends with BuildStoppedError when `signal` aborts.
 */
export async function acquireBuildLock(dir: string, logger: Logger, signal: AbortSignal | undefined): Promise<void> {
  const me = processIdentity(process.pid);
  for (let waited = 0; ; waited += 500) {
    if (signal?.aborted) throw new BuildStoppedError("stopped while waiting for another build of the web app");
    const fresh = `${dir}.${process.pid}.${randomBytes(4).toString("hex")}`;
    mkdirSync(fresh);
    writeFileSync(path.join(fresh, "pid"), me);
    try {
      renameSync(fresh, dir);
      return;
    } catch {
      rmSync(fresh, { recursive: true, force: true });
    }
    if (!statSync(dir, { throwIfNoEntry: false })) continue; // given back meanwhile
    const seen = readRecord(dir, "pid");
    if (!lockHeld(dir)) {
      const aside = `${dir}.stale.${process.pid}.${randomBytes(4).toString("hex")}`;
      try {
        renameSync(dir, aside);
      } catch {
        continue; // another start moved it first
      }
      if (readRecord(aside, "pid") !== seen || lockHeld(aside)) {
        // Not the lock judged dead: another start's, taken in between, which is put back. (Should a third start
        // have taken the lock in that instant too, the second's record is left aside, and its release, which
        // checks its record, removes nothing of the third's.)
        try {
          renameSync(aside, dir);
        } catch {
          // left aside
        }
        continue;
      }
      rmSync(aside, { recursive: true, force: true });
      continue;
    }
    if (waited % 10_000 === 0) logger.info("waiting for another build of the web app to finish");
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Gives the build lock `dir` back, if it is still this process's (never another start's). */
export function releaseBuildLock(dir: string): void {
  if (readRecord(dir, "pid") === processIdentity(process.pid)) rmSync(dir, { recursive: true, force: true });
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
      // Nor does the build read .env files (lib/env-files.ts).
      env: keepNextFromEnvFiles({ ...env }),
      stdio: ["ignore", "pipe", "pipe"],
      detached: signal !== undefined,
    });
    let stopped = false;
    let exited = false;
    let failure: unknown;
    let killTimer: NodeJS.Timeout | undefined;
    const keep = (chunk: Buffer) => {
      output.push(chunk.toString());
      if (output.length > 400) output.shift();
    };
    // The group when it has one; otherwise the build alone (its caller's group is not ours to signal).
    const group = (sig: NodeJS.Signals) => {
      try {
        if (!child.pid) return;
        if (signal) process.kill(-child.pid, sig);
        else if (!exited) child.kill(sig);
      } catch {
        // the group is gone already
      }
    };
    const stop = () => {
      // Asked once the build had ended by itself: its own outcome stands.
      if (exited) return;
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
      exited = true;
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
      if (failure !== undefined) reject(failure);
      else if (stopped) reject(new BuildStoppedError("the web app's build was stopped"));
      else resolve({ code, output: output.join("") });
    });
    // Once everything above listens: a build its caller could not record (the lock's build-pid) is not left
    // running unrecorded, it is stopped, and the answer is that failure.
    try {
      if (child.pid) options.onStart?.(child.pid);
    } catch (error) {
      failure = error;
      stop();
    }
  });
}

export async function buildIfStale(logger: Logger, options: { signal?: AbortSignal } = {}): Promise<void> {
  // Taken now, before the first await: npm start points TMPDIR into DATA_DIR while initdb runs (db/embedded.ts),
  // beside this build, and removes that directory afterwards: a build that inherited it would lose its temp files.
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  if (buildIsCurrent()) return;
  await acquireBuildLock(lockDir, logger, options.signal);
  try {
    const fingerprint = sourceFingerprint();
    if (buildIsCurrent(fingerprint)) return;
    logger.info("building the web app (next build); this happens once after a change of the sources");
    const started = Date.now();
    const { code, output } = await runNextBuild(env, {
      signal: options.signal,
      onStart: (pid) => writeFileSync(path.join(lockDir, "build-pid"), processIdentity(pid)),
    });
    if (code !== 0) {
      throw new Error(`next build failed (exit ${code}):\n${output.split("\n").slice(-40).join("\n")}`);
    }
    writeFileSync(stampFile, fingerprint);
    logger.info("web app built", { seconds: Math.round((Date.now() - started) / 100) / 10 });
  } finally {
    releaseBuildLock(lockDir);
  }
}
