import { spawn, type ChildProcess } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * A real local chain: the anvil binary shipped by npm `@foundry-rs/anvil`, spawned directly (not through npx,
 * which leaves an orphan child) and stopped by its pid. History is pruned so memory and disk stay bounded; any
 * cache anvil keeps lives under the given data directory, never in ~/.foundry.
 */

export type AnvilOptions = {
  port: number;
  /** Seconds between blocks; 0 mines every transaction at once. */
  blockTime: number;
  /** Where the chain's state (when `persistState`), cache and log live. */
  dataDir: string;
  /** Dump the state on exit (and every 10 s) and load it on start, so a restart keeps the chain. */
  persistState?: boolean;
  chainId?: number;
  gasLimit?: bigint;
  extraArgs?: string[];
};

export type Anvil = {
  rpcUrl: string;
  pid: number;
  process: ChildProcess;
  stop: () => Promise<void>;
};

export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const pkg = path.dirname(require.resolve("@foundry-rs/anvil-linux-amd64/package.json"));
  const bin = path.join(pkg, "bin", "anvil");
  if (!existsSync(bin)) throw new Error(`anvil binary not found at ${bin}: run npm install`);
  return bin;
}

async function rpcReady(rpcUrl: string): Promise<boolean> {
  try {
    const res = await fetch(rpcUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
      signal: AbortSignal.timeout(1000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

export async function startAnvil(options: AnvilOptions): Promise<Anvil> {
  const dir = path.resolve(options.dataDir);
  mkdirSync(dir, { recursive: true });
  const args = [
    "--host", "127.0.0.1",
    "--port", String(options.port),
    "--prune-history", "64",
    "--cache-path", path.join(dir, "cache"),
    "--chain-id", String(options.chainId ?? 31337),
    "--gas-limit", String(options.gasLimit ?? 30_000_000n),
    "--accounts", "10",
    "--balance", "1000000",
  ];
  if (options.blockTime > 0) args.push("--block-time", String(options.blockTime));
  if (options.persistState) args.push("--state", path.join(dir, "state.json"), "--state-interval", "10");
  args.push(...(options.extraArgs ?? []));

  const log = createWriteStream(path.join(dir, "anvil.log"), { flags: "a" });
  const child = spawn(anvilBinary(), args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HOME: dir } });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const rpcUrl = `http://127.0.0.1:${options.port}`;

  let exited = false;
  const exitedPromise = new Promise<void>((resolve) => child.once("exit", () => ((exited = true), resolve())));

  const deadline = Date.now() + 20_000;
  while (!(await rpcReady(rpcUrl))) {
    if (exited) throw new Error(`anvil exited during start-up (see ${path.join(dir, "anvil.log")})`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`anvil did not answer on ${rpcUrl} within 20 s`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  return {
    rpcUrl,
    pid: child.pid!,
    process: child,
    stop: async () => {
      if (exited) return;
      // SIGTERM lets anvil dump its state; SIGKILL if it does not go.
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exitedPromise;
      clearTimeout(timer);
      log.end();
    },
  };
}
