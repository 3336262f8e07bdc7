import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * `npm start` as a user runs it (`scripts/start.ts`: the supervisor with embedded PostgreSQL, a local anvil, the web
 * server and the worker), for the tests that drive the whole stack: scripts/start.test.ts and
 * scripts/self-healing.test.ts. Everything the stack prints is kept in `output`, and a condition not reached in time
 * fails with its tail.
 */

const ROOT = path.resolve(import.meta.dirname, "..");

/** Whether a process of this pid exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export class NpmStartStack {
  /** What the supervisor (and its children) printed since the last reset (`stack.output = ""`). */
  output = "";

  constructor(
    readonly env: NodeJS.ProcessEnv,
    readonly dataDir: string,
    readonly port: number,
  ) {}

  /** Starts the supervisor; `ownGroup` gives it its own process group, as a terminal gives `npm start`. */
  start(options: { ownGroup?: boolean } = {}): ChildProcess {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "start.ts")], {
      cwd: ROOT,
      env: this.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: options.ownGroup ?? false,
    });
    this.capture(child);
    return child;
  }

  /** Keeps what `child` prints in `output`. */
  capture(child: ChildProcess): void {
    child.stdout?.on("data", (c: Buffer) => (this.output += c.toString()));
    child.stderr?.on("data", (c: Buffer) => (this.output += c.toString()));
  }

  /** SIGTERM, then its exit code. */
  async stop(child: ChildProcess): Promise<number | null> {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    return exited;
  }

  /** Polls `probe` until it answers a value, at most `ms`; the error names `what` and shows the output's tail. */
  async until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms: number, intervalMs = 100): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms\n${this.output.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }

  /** GET /health, or undefined while nothing answers. */
  async health(): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
    try {
      const res = await fetch(`http://127.0.0.1:${this.port}/health`, { signal: AbortSignal.timeout(2000) });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    } catch {
      return undefined;
    }
  }

  /** Waits until GET /health answers 200. */
  async healthy(what: string, ms: number): Promise<void> {
    await this.until(what, async () => ((await this.health())?.status === 200 ? true : undefined), ms);
  }

  /**
   * The pids the supervisor wrote to DATA_DIR/processes.json; `{}` while there is none, or while the supervisor is
   * rewriting it (a poll that reads it half-written tries again).
   */
  processes(): Record<string, number> {
    const file = path.join(this.dataDir, "processes.json");
    if (!existsSync(file)) return {};
    try {
      return JSON.parse(readFileSync(file, "utf8")) as Record<string, number>;
    } catch {
      return {};
    }
  }
}
