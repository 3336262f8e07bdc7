import type { ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NpmStartStack } from "@/test/npm-start";
import { freePort } from "@/test/ports";

/**
 * What `npm start` leaves for other local users to read: its files (logs with requesters' IPs), the environments of
 * the processes it starts (/proc/<pid>/environ), and the superuser password initdb is handed.
 */

const SECRETS = {
  RELAYER_PRIVATE_KEYS: `0x${"11".repeat(32)}`,
  DEPLOYER_PRIVATE_KEY: `0x${"22".repeat(32)}`,
  ADMIN_TOKEN: "fake-admin-token-0123456789-abcdefghijklmnop",
  WEBHOOK_SECRET: `whsec_${Buffer.from("fake webhook secret of 32 bytes!").toString("base64")}`,
  WALLET_MNEMONIC: "fake fake fake fake fake fake fake fake fake fake fake fake",
};
type Secret = keyof typeof SECRETS;

let dataDir: string;
let systemTmp: string;
let stack: NpmStartStack;
let supervisor: ChildProcess | undefined;
let watcher: FSWatcher | undefined;
const createdInTmp: string[] = [];

beforeAll(async () => {
  // The system's temp dir as /tmp is (1777), of this test alone, so that what is created there is ours.
  systemTmp = await mkdtemp(path.join(tmpdir(), "sponsorship-privacy-tmp-"));
  await chmod(systemTmp, 0o1777);
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-privacy-"));
  // As an older version left them: a data directory and logs any local user could read.
  await chmod(dataDir, 0o755);
  mkdirSync(path.join(dataDir, "logs"), { mode: 0o755 });
  writeFileSync(path.join(dataDir, "logs", "web.log"), "", { mode: 0o644 });
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ...SECRETS,
    TMPDIR: systemTmp,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(await freePort()),
    LOCAL_CHAIN_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    LOCAL_BLOCK_TIME: "0",
    LOG_LEVEL: "info",
  };
  for (const name of ["DATABASE_URL", "RPC_URL", "REGISTRY_ADDRESS", "TREASURY_ADDRESS", "WEBHOOK_URLS"]) delete env[name];
  stack = new NpmStartStack(env, dataDir, port);
});

afterAll(async () => {
  watcher?.close();
  if (supervisor && supervisor.exitCode === null) await stack.stop(supervisor);
  await rm(dataDir, { recursive: true, force: true });
  await rm(systemTmp, { recursive: true, force: true });
}, 60_000);

function environ(pid: number): Map<string, string> {
  return new Map(
    readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .filter((e) => e.includes("="))
      .map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] as const),
  );
}

/** The secrets a process holds, whatever the variable's name. */
function secretsOf(pid: number): Secret[] {
  const values = [...environ(pid).values()];
  return (Object.keys(SECRETS) as Secret[]).filter((name) => values.some((value) => value.includes(SECRETS[name])));
}

const mode = (file: string) => (statSync(file).mode & 0o777).toString(8);

describe("npm start keeps its secrets and logs from other local users", () => {
  it("comes up on a first start without writing initdb's password file to the system's temp dir", async () => {
    watcher = watch(systemTmp, (_event, name) => createdInTmp.push(String(name)));
    supervisor = stack.start();
    const started = supervisor;
    await stack.until(
      "GET /health answers 200",
      async () => {
        if (started.exitCode !== null) throw new Error(`npm start exited (${started.exitCode}):\n${stack.output}`);
        return (await stack.health())?.status === 200 ? true : undefined;
      },
      240_000,
    );
    // Before: pg-password-<id> (the superuser's password, 0644) in the system's temp dir while initdb ran.
    expect(createdInTmp.filter((name) => name.startsWith("pg-password-"))).toEqual([]);
    expect(readdirSync(dataDir)).not.toContain("initdb-tmp");
    expect(existsSync(path.join(dataDir, "postgres", "PG_VERSION"))).toBe(true);
  }, 300_000);

  it("gives each process only the secrets it uses: none to PostgreSQL and anvil, the keys to the worker, the token to the web server", () => {
    const pids = stack.processes();
    // Before: every process held every secret but the keys, and PostgreSQL and anvil the keys too.
    expect({
      postgres: secretsOf(pids.postgres!),
      chain: secretsOf(pids.chain!),
      web: secretsOf(pids.web!),
      worker: secretsOf(pids.worker!),
    }).toEqual({
      postgres: [],
      chain: [],
      web: ["ADMIN_TOKEN", "WEBHOOK_SECRET"],
      worker: ["RELAYER_PRIVATE_KEYS", "WEBHOOK_SECRET"],
    });
  });

  it("keeps DATA_DIR, its logs directory and the log files to their owner (0600 files), tightening what an older start left", () => {
    // As root PostgreSQL runs as the `postgres` user, which must traverse DATA_DIR to reach its cluster: 0711.
    expect(mode(dataDir)).toBe(userInfo().uid === 0 ? "711" : "700");
    expect(mode(path.join(dataDir, "logs"))).toBe("700");
    for (const log of ["logs/web.log", "logs/worker.log", "anvil/anvil.log"]) {
      expect([log, mode(path.join(dataDir, log))]).toEqual([log, "600"]);
    }
  });
});
