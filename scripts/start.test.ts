import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import postgres from "postgres";
import { createPublicClient, http } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registryAbi } from "@/contracts/generated/registry";
import { embeddedServiceUrl } from "@/db/embedded";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { leadsProcessGroup, processIdentity } from "@/lib/process-alive";
import { alive, NpmStartStack } from "@/test/npm-start";
import { freePort } from "@/test/ports";

/**
 * `npm start` as a user runs it: the real supervisor with embedded PostgreSQL, a local anvil with the contracts,
 * the web server and the worker, on free ports and a temporary DATA_DIR.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
let dataDir: string;
let env: NodeJS.ProcessEnv;
let port: number;
let pgPort: number;
let supervisor: ChildProcess | undefined;
let stack: NpmStartStack;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-start-"));
  port = await freePort();
  pgPort = await freePort();
  env = {
    ...process.env,
    PORT: String(port),
    EMBEDDED_PG_PORT: String(pgPort),
    LOCAL_CHAIN_PORT: String(await freePort()),
    DATA_DIR: dataDir,
    LOCAL_BLOCK_TIME: "0",
    WORKER_INTERVAL_MS: "500",
    LOG_LEVEL: "info",
    // Only contracts:deploy reads it: no child of npm start may get it.
    DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY,
  };
  delete env.DATABASE_URL;
  delete env.RPC_URL;
  delete env.ADMIN_TOKEN;
  delete env.REGISTRY_ADDRESS;
  delete env.TREASURY_ADDRESS;
  delete env.RELAYER_PRIVATE_KEYS;
  stack = new NpmStartStack(env, dataDir, port);
});

afterAll(async () => {
  if (supervisor && supervisor.exitCode === null) await stack.stop(supervisor);
  await rm(dataDir, { recursive: true, force: true });
}, 60_000);

describe("npm start", () => {
  const wallet = `0x${"5e".repeat(20)}`;
  let deployment: { registryAddress: `0x${string}`; treasuryAddress: `0x${string}` };

  it("brings up database, chain, web server and worker with no configuration, past pid files whose pids a reboot gave to other processes", async () => {
    // Left by a machine that went down with npm start running: after the reboot their pids belong to other processes,
    // supervisor.pid's to another checkout's npm start (a command line running scripts/start.ts), started after the
    // one that wrote the file (another start time).
    const unrelated = spawn("sleep", ["600"], { stdio: "ignore" });
    const otherStart = spawn(process.execPath, ["-e", "setTimeout(() => {}, 600_000)", "/elsewhere/scripts/start.ts"], { stdio: "ignore" });
    try {
      mkdirSync(path.join(dataDir, "anvil"), { recursive: true });
      // Its start time in the name of the file's second link, as npm start records it.
      const [pid, start] = processIdentity(otherStart.pid!).split(" ");
      const staleLink = path.join(dataDir, `supervisor.started-${pid}-${Number(start) - 1}`);
      writeFileSync(path.join(dataDir, "supervisor.pid"), pid!);
      linkSync(path.join(dataDir, "supervisor.pid"), staleLink);
      writeFileSync(path.join(dataDir, "anvil", "anvil.pid"), String(unrelated.pid));
      const started = stack.start();
      supervisor = started;
      // Before: every start was refused as "Another npm start (pid ...) is running".
      const ok = await stack.until(
        "GET /health answers 200",
        async () => {
          if (started.exitCode !== null) throw new Error(`npm start exited (${started.exitCode}):\n${stack.output}`);
          return (await stack.health())?.status === 200 ? true : undefined;
        },
        240_000,
      );
      expect(ok).toBe(true);
      expect(unrelated.exitCode === null && unrelated.signalCode === null).toBe(true);
      expect(otherStart.exitCode === null && otherStart.signalCode === null).toBe(true);
      // Before: "Another npm start (pid ...) is running", for as long as the other checkout's start ran.
      expect(stack.output).toMatch(/supervisor.pid names a process started after the npm start that wrote it/);
      // This start's own record: the bare pid (what earlier versions read), its start time in the second link.
      expect(readFileSync(path.join(dataDir, "supervisor.pid"), "utf8")).toBe(String(started.pid));
      const ownLink = path.join(dataDir, `supervisor.started-${processIdentity(started.pid!).replace(" ", "-")}`);
      expect(statSync(ownLink).ino).toBe(statSync(path.join(dataDir, "supervisor.pid")).ino);
      expect(existsSync(staleLink)).toBe(false);
    } finally {
      unrelated.kill("SIGKILL");
      otherStart.kill("SIGKILL");
    }
    expect(stack.output).toMatch(/generated an administrator token/);
    const token = readFileSync(path.join(dataDir, "admin-token"), "utf8").trim();
    expect(token.length).toBeGreaterThanOrEqual(16);

    deployment = JSON.parse(readFileSync(path.join(dataDir, "deployment.json"), "utf8")) as typeof deployment;
    const client = createPublicClient({ transport: http(`http://127.0.0.1:${env.LOCAL_CHAIN_PORT}`) });
    const fresh = `0x${"7a".repeat(20)}` as const;
    expect(await client.readContract({ address: deployment.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [fresh] })).toBe(false);
    expect(await client.getBalance({ address: deployment.treasuryAddress })).toBeGreaterThan(0n);

    const res = await fetch(`http://127.0.0.1:${port}/wallets/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ walletAddress: wallet }),
    });
    expect(res.status).toBe(201);
  });

  it("refuses a second npm start on the same DATA_DIR while the first runs, and leaves the directory as it was", async () => {
    const mode = statSync(dataDir).mode & 0o777;
    // As root the running PostgreSQL (user postgres) reaches its cluster through DATA_DIR: 0711.
    if (process.getuid?.() === 0) expect(mode.toString(8)).toBe("711");
    const second = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "start.ts")], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    second.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((resolve) => second.once("exit", resolve));
    expect(code).toBe(1);
    expect(stderr).toContain(`Another npm start (pid ${stack.processes().supervisor}) is running with DATA_DIR ${dataDir}`);
    // Before: the refused start reset the mode to 0700 first, and as root PostgreSQL lost its own cluster.
    expect((statSync(dataDir).mode & 0o777).toString(8)).toBe(mode.toString(8));
    // Nor leaves its claim file there (fail() exits at once, past the claim's own cleanup).
    const running = `supervisor.started-${processIdentity(stack.processes().supervisor!).replace(" ", "-")}`;
    expect(readdirSync(dataDir).filter((name) => name.startsWith("supervisor.") && name !== "supervisor.pid" && name !== running)).toEqual([]);
    expect(await stack.health()).toMatchObject({ status: 200 });
  });

  it("hands relayer keys to the worker alone: the web server's environment holds no key, and the dashboard still lists the relayers", async () => {
    const environ = (pid: number) =>
      new Map(
        readFileSync(`/proc/${pid}/environ`, "utf8")
          .split("\0")
          .filter((e) => e.includes("="))
          .map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] as const),
      );
    const { web, worker } = stack.processes();
    const webEnv = environ(web!);
    expect([...webEnv.keys()].filter((name) => /PRIVATE|(^|_)KEYS?$|MNEMONIC/i.test(name))).toEqual([]);
    expect([...webEnv.values()].filter((value) => /0x[0-9a-f]{64}/i.test(value))).toEqual([]);
    expect(webEnv.get("DATABASE_URL")).toBeDefined();
    // The worker has them (it signs), so the probe above reads a real environment.
    expect(environ(worker!).get("RELAYER_PRIVATE_KEYS")).toMatch(/^0x[0-9a-f]{64}(,0x[0-9a-f]{64})*$/);
    expect(environ(worker!).get("DEPLOYER_PRIVATE_KEY")).toBeUndefined();

    // The relayers the dashboard shows come from the database, with their balances read from the chain.
    const token = readFileSync(path.join(dataDir, "admin-token"), "utf8").trim();
    const signIn = await fetch(`http://127.0.0.1:${port}/admin/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
    });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const overview = await stack.until(
      "the overview listing the worker's relayers",
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/admin/overview`, { headers: { cookie } });
        const body = (await res.json()) as { relayers: { address: string; balance: string | null }[] };
        return res.status === 200 && body.relayers.length === 4 ? body : undefined;
      },
      30_000,
    );
    for (const r of overview.relayers) expect(BigInt(r.balance ?? "0")).toBeGreaterThan(0n);
  });

  it("restarts a worker killed with SIGKILL, which beats again", async () => {
    const sql = postgres(embeddedServiceUrl(dataDir, pgPort), { max: 1, onnotice: () => {} });
    try {
      const before = stack.processes().worker!;
      expect(alive(before)).toBe(true);
      process.kill(before, "SIGKILL");
      const after = await stack.until(
        "a new worker pid",
        () => {
          const pid = stack.processes().worker;
          return pid && pid !== before && alive(pid) ? pid : undefined;
        },
        30_000,
      );
      expect(stack.output).toMatch(/"process":"worker".*killed by SIGKILL|killed by SIGKILL.*"process":"worker"/);
      await stack.until(
        "a heartbeat from the new worker",
        async () => {
          const rows = await sql`SELECT 1 FROM worker_heartbeats WHERE pid = ${after} AND last_beat_at > now() - interval '10 seconds'`;
          return rows.length > 0 ? true : undefined;
        },
        30_000,
      );
    } finally {
      await sql.end();
    }
  });

  it("stops everything cleanly on SIGTERM", async () => {
    const pids = stack.processes();
    const code = await stack.stop(supervisor!);
    expect(code).toBe(0);
    for (const name of ["web", "worker"]) expect(alive(pids[name]!)).toBe(false);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false);
    // Every cleanup ran: the last line is logged and the supervisor's own files are gone.
    expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"}/);
    expect(existsSync(path.join(dataDir, "processes.json"))).toBe(false);
    expect(existsSync(path.join(dataDir, "supervisor.pid"))).toBe(false);
    expect(readdirSync(dataDir).filter((name) => name.startsWith("supervisor."))).toEqual([]);
    expect(await stack.health()).toBeUndefined();
    // The local chain was stopped too (its port no longer answers).
    const chain = await fetch(`http://127.0.0.1:${env.LOCAL_CHAIN_PORT}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    }).then(
      () => "answered",
      () => "refused",
    );
    expect(chain).toBe("refused");
  });

  it("reuses the data and the deployment on a second start, past a supervisor.pid that holds no pid", async () => {
    stack.output = "";
    // Left by a start killed while writing it, or a full disk. Before: "Another npm start (pid 0) is running", for ever.
    writeFileSync(path.join(dataDir, "supervisor.pid"), "");
    // A started- name whose supervisor.pid was removed by hand (its process gone), and a file a start killed while
    // taking a stale supervisor.pid over left with its started- link: cleaned up, not left for ever. Kept: the claim in
    // progress of a process that runs (this one stands in for it), and a name still linked to another file.
    // Pids above Linux's highest pid_max (4194304): never a process's.
    const orphan = path.join(dataDir, "supervisor.started-4194305-12345");
    writeFileSync(orphan, "4194305");
    const stale = path.join(dataDir, "supervisor.pid.stale-4194306");
    writeFileSync(stale, "4194307");
    linkSync(stale, path.join(dataDir, "supervisor.started-4194307-777"));
    const running = path.join(dataDir, `supervisor.started-${processIdentity(process.pid).replace(" ", "-")}`);
    writeFileSync(running, String(process.pid));
    const linked = path.join(dataDir, "supervisor.started-4194308-1");
    writeFileSync(linked, "4194308");
    linkSync(linked, path.join(dataDir, "kept-by-the-operator"));
    supervisor = stack.start();
    await stack.until("GET /health answers 200 again", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    const again = JSON.parse(readFileSync(path.join(dataDir, "deployment.json"), "utf8")) as typeof deployment;
    expect(again.registryAddress).toBe(deployment.registryAddress);
    expect(again.treasuryAddress).toBe(deployment.treasuryAddress);
    const res = await fetch(`http://127.0.0.1:${port}/wallets/${wallet}`);
    expect(res.status).toBe(200);
    expect(stack.output).not.toMatch(/generated an administrator token/);
    expect(stack.output).toMatch(/supervisor.pid holds no pid/);
    expect([orphan, stale, path.join(dataDir, "supervisor.started-4194307-777")].filter((f) => existsSync(f))).toEqual([]);
    expect([running, linked].filter((f) => existsSync(f))).toEqual([running, linked]);
    for (const file of [running, linked, path.join(dataDir, "kept-by-the-operator")]) rmSync(file);
    expect(await stack.stop(supervisor)).toBe(0);
  });

  it("stops in order on Ctrl-C (SIGINT to the whole process group): children first, then the chain and PostgreSQL", async () => {
    stack.output = "";
    supervisor = stack.start({ ownGroup: true });
    await stack.until("GET /health answers 200", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    const pids = stack.processes();
    // PostgreSQL has a group of its own, as the web server, the worker and the chain have: the Ctrl-C reaches the
    // supervisor alone, which stops PostgreSQL last. Before, it shared the supervisor's group and began its fast
    // shutdown at once, while the web server drained and the worker ended its step.
    for (const name of ["web", "worker", "chain", "postgres"]) expect([name, leadsProcessGroup(pids[name]!)]).toEqual([name, true]);
    const exited = new Promise<number | null>((resolve) => supervisor!.once("exit", (code) => resolve(code)));
    process.kill(-supervisor!.pid!, "SIGINT");
    expect(await exited).toBe(0);
    for (const name of ["web", "worker"]) expect(alive(pids[name]!)).toBe(false);
    // Only the supervisor got the signal: the worker stopped once, cleanly, and the chain was stopped, not killed.
    expect(stack.output).toMatch(/"process":"worker","exit":"exited with code 0"/);
    expect(stack.output).not.toMatch(/second signal/);
    expect(stack.output).not.toMatch(/anvil exited unexpectedly/);
    expect(stack.output).not.toMatch(/"msg":"exited unexpectedly; restarting","component":"supervisor","process":"postgres"/);
    // The database was there until the web server and the worker had stopped.
    expect(stack.output).not.toMatch(/database unavailable|the database cannot be reached/);
    expect(stack.output).toMatch(/"msg":"stopped","component":"supervisor"}/);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false);
  });

  it("after the supervisor itself is killed (SIGKILL), its children stop by themselves and the next start recovers", async () => {
    stack.output = "";
    supervisor = stack.start();
    await stack.until("GET /health answers 200", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    const pids = stack.processes();
    supervisor.kill("SIGKILL");
    // Started again at once, as a process manager does: PostgreSQL and anvil were left running, and the next start
    // stops them by their pid files (their ports are not refused); the web server left stopping may still hold PORT
    // for a second, and is waited for (scripts/start-refusals.test.ts proves that wait).
    stack.output = "";
    supervisor = stack.start();
    await stack.until("web server and worker to stop without their supervisor", () => (alive(pids.web!) || alive(pids.worker!) ? undefined : true), 30_000);
    await stack.until("GET /health answers 200 after the crash", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    expect(await stack.stop(supervisor)).toBe(0);
    // Two starts and a crash: more than the default minute on a loaded machine (each wait above is bounded itself).
  }, 300_000);

  it("stops everything on SIGTERM after whoever read its output went away (every write to it fails with EPIPE)", async () => {
    stack.output = "";
    supervisor = stack.start();
    await stack.until("GET /health answers 200", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    const pids = stack.processes();
    // The reading end of its stdout and stderr closed, as when the terminal or the program reading them dies.
    supervisor.stdout!.destroy();
    supervisor.stderr!.destroy();
    const exited = new Promise<number | null>((resolve) => supervisor!.once("exit", (code) => resolve(code)));
    supervisor.kill("SIGTERM");
    await stack.until("the supervisor to exit", () => (supervisor!.exitCode !== null || supervisor!.signalCode !== null ? true : undefined), 60_000);
    expect(await exited).toBe(0);
    for (const name of ["web", "worker", "chain"]) expect(alive(pids[name]!)).toBe(false);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false);
  });

  it("shuts down by itself when the process that started it dies without passing a signal on", async () => {
    stack.output = "";
    // A shell that does not exec (like `npm start` through sh), killed with SIGKILL: the supervisor is orphaned.
    const shell = spawn("bash", ["-c", `"${process.execPath}" --import tsx "${path.join(ROOT, "scripts", "start.ts")}"; true`], {
      cwd: ROOT,
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    stack.capture(shell);
    await stack.until("GET /health answers 200", async () => ((await stack.health())?.status === 200 ? true : undefined), 120_000);
    const pids = stack.processes();
    shell.kill("SIGKILL");
    await stack.until("the orphaned supervisor to stop everything", () => (alive(pids.supervisor!) ? undefined : true), 60_000);
    for (const name of ["web", "worker"]) expect(alive(pids[name]!)).toBe(false);
    expect(existsSync(path.join(dataDir, "postgres", "postmaster.pid"))).toBe(false);
  });
});
