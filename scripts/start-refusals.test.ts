import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LOCAL_CHAIN_PORT_ALSO } from "@/contracts/local-chain";
import { LOCAL_RELAYER_KEYS } from "@/lib/config";
import { freePort } from "@/test/ports";

/**
 * `npm start` refuses unsafe configurations before it starts anything (issue 11, items 4 and 8): one line on
 * stderr naming the variable, exit 1, nothing written to DATA_DIR.
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const STRONG_TOKEN = "pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA-refusals";
const OWN_KEY = `0x${"5a".repeat(31)}01`;
let dataDir: string;
let sepoliaOnLoopback: Server;
let sepoliaUrl: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-refusals-"));
  // A loopback RPC endpoint of another chain: what an SSH tunnel to a real network looks like.
  sepoliaOnLoopback = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: "0xaa36a7" })));
  });
  await new Promise<void>((resolve) => sepoliaOnLoopback.listen(0, "127.0.0.1", () => resolve()));
  sepoliaUrl = `http://127.0.0.1:${(sepoliaOnLoopback.address() as AddressInfo).port}`;
});

afterAll(async () => {
  sepoliaOnLoopback?.close();
  await rm(dataDir, { recursive: true, force: true });
});

function start(env: Record<string, string>): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const base = { ...process.env };
  for (const name of ["ADMIN_TOKEN", "RPC_URL", "DATABASE_URL", "CHAIN_ID", "RELAYER_PRIVATE_KEYS", "DEPLOYER_PRIVATE_KEY"]) delete base[name];
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "start.ts")], {
    cwd: ROOT,
    env: { ...base, DATA_DIR: dataDir, PORT: "1", EMBEDDED_PG_PORT: "2", LOCAL_CHAIN_PORT: "3", LOG_LEVEL: "silent", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  let stdout = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  return new Promise((resolve) =>
    child.once("exit", (code) => {
      clearTimeout(killer);
      resolve({ code, stderr, stdout });
    }),
  );
}

async function expectRefused(env: Record<string, string>, variable: string): Promise<string> {
  const { code, stderr, stdout } = await start(env);
  expect(code, stderr + stdout).toBe(1);
  const lines = stderr.trim().split("\n");
  expect(lines, stderr).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^Invalid configuration: ${variable} `));
  expect(await readdir(dataDir)).toEqual([]);
  return lines[0]!;
}

describe("npm start refuses", () => {
  it("anvil's well-known relayer keys with a remote RPC_URL", async () => {
    await expectRefused(
      { RPC_URL: "https://rpc.sepolia.example.org", RELAYER_PRIVATE_KEYS: LOCAL_RELAYER_KEYS[0]!, ADMIN_TOKEN: STRONG_TOKEN },
      "RELAYER_PRIVATE_KEYS",
    );
  });

  it("anvil's well-known keys with a loopback RPC_URL whose chain is not 31337 (asked of the RPC)", async () => {
    const line = await expectRefused({ RPC_URL: sepoliaUrl, RELAYER_PRIVATE_KEYS: LOCAL_RELAYER_KEYS[1]!, ADMIN_TOKEN: STRONG_TOKEN }, "RELAYER_PRIVATE_KEYS");
    expect(line).toContain("11155111");
  });

  it("to generate an administrator token when the chain is not the local one", async () => {
    await expectRefused({ RPC_URL: "https://rpc.sepolia.example.org", RELAYER_PRIVATE_KEYS: OWN_KEY }, "ADMIN_TOKEN");
  });

  it("two of its ports set to one number (the second server could never start)", async () => {
    const line = await expectRefused({ PORT: "43210", LOCAL_CHAIN_PORT: "43210" }, "PORT");
    expect(line).toBe("Invalid configuration: PORT and LOCAL_CHAIN_PORT are both 43210: give each its own port");
  });

  it("a configured ADMIN_TOKEN that is short or of low variety", async () => {
    await expectRefused({ ADMIN_TOKEN: "sixteen-chars-ok" }, "ADMIN_TOKEN");
    await expectRefused({ ADMIN_TOKEN: "ab".repeat(20) }, "ADMIN_TOKEN");
  });

  it("webhooks badly configured (issue 12): URLs without a secret, a secret not whsec_, a non-URL, a ceiling that is not a number", async () => {
    const secret = `whsec_${Buffer.alloc(32, 9).toString("base64")}`;
    await expectRefused({ WEBHOOK_URLS: "https://hooks.example.org/in" }, "WEBHOOK_SECRET");
    await expectRefused({ WEBHOOK_URLS: "https://hooks.example.org/in", WEBHOOK_SECRET: "not-a-whsec-secret-0123456789abcdef" }, "WEBHOOK_SECRET");
    await expectRefused({ WEBHOOK_URLS: "hooks.example.org", WEBHOOK_SECRET: secret }, "WEBHOOK_URLS\\.0");
    await expectRefused({ MAX_FEE_PER_GAS_GWEI: "fifty" }, "MAX_FEE_PER_GAS_GWEI");
  });

  it("a key that is no secp256k1 key, and one contract address without the other (both failed only in the worker, restarted for ever)", async () => {
    await expectRefused({ RELAYER_PRIVATE_KEYS: `0x${"0".repeat(64)}` }, "RELAYER_PRIVATE_KEYS\\.0");
    await expectRefused({ REGISTRY_ADDRESS: `0x${"12".repeat(20)}` }, "TREASURY_ADDRESS");
  });

  it("a DATA_DIR the file system refuses (here a file in its path), in one line naming it, not a stack trace", async () => {
    const file = path.join(dataDir, "not-a-directory");
    await writeFile(file, "");
    try {
      const { code, stderr, stdout } = await start({ DATA_DIR: path.join(file, "data") });
      expect(code, stderr + stdout).toBe(1);
      const lines = stderr.trim().split("\n");
      expect(lines, stderr).toHaveLength(1);
      expect(lines[0]).toMatch(
        new RegExp(
          `^Invalid configuration: DATA_DIR ${file}/data cannot be used: (a file of that name is in the way \\(EEXIST|a part of the path is not a directory \\(ENOTDIR), mkdir `,
        ),
      );
    } finally {
      await rm(file, { force: true });
    }
  });

  it("an administrator token kept in DATA_DIR that is empty or edited into a weak one (ADMIN_TOKEN unset), leaving the file as it was", async () => {
    const file = path.join(dataDir, "admin-token");
    try {
      for (const kept of ["\n", "short-token\n"]) {
        await writeFile(file, kept);
        const { code, stderr, stdout } = await start({});
        expect(code, stderr + stdout).toBe(1);
        const lines = stderr.trim().split("\n");
        expect(lines, stderr).toHaveLength(1);
        expect(lines[0]).toMatch(
          new RegExp(
            `^Invalid administrator token in ${file}: it (is empty|must be at least 32 characters).*; delete the file to generate a new one, or set ADMIN_TOKEN$`,
          ),
        );
        expect(await readdir(dataDir)).toEqual(["admin-token"]);
        expect(await readFile(file, "utf8")).toBe(kept);
      }
    } finally {
      await rm(file, { force: true });
    }
  });
});

/** A TCP server on a free port in this process (held by the test's own pid), for the time of `run`. */
async function holding<T>(host: string | undefined, run: (port: number) => Promise<T>): Promise<T> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()));
  try {
    return await run((server.address() as AddressInfo).port);
  } finally {
    server.close();
  }
}

describe("npm start refuses a port another process listens on, before it starts anything", () => {
  /** Each start gets free ports of its own; the one under test is then taken. */
  const freePorts = async () => ({ PORT: String(await freePort()), EMBEDDED_PG_PORT: String(await freePort()), LOCAL_CHAIN_PORT: String(await freePort()) });

  async function expectPortRefused(variable: string, env: Record<string, string>, by: RegExp): Promise<string> {
    const { code, stderr, stdout } = await start(env);
    expect(code, stderr + stdout).toBe(1);
    const lines = stderr.trim().split("\n");
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^${variable}=${env[variable]} is in use by `));
    expect(lines[0]).toMatch(by);
    const also = variable === "LOCAL_CHAIN_PORT" ? LOCAL_CHAIN_PORT_ALSO : "";
    expect(lines[0]!.endsWith(`: stop it, or set ${variable} to a free port${also}`), lines[0]).toBe(true);
    // Nothing was started, and the start's claim on DATA_DIR went with it.
    const left = await readdir(dataDir);
    expect(left.filter((name) => name !== "logs")).toEqual([]);
    return lines[0]!;
  }

  afterAll(async () => {
    for (const name of await readdir(dataDir)) await rm(path.join(dataDir, name), { recursive: true, force: true });
  });

  // Before: the web server failed with EADDRINUSE and was started again with backoff, for ever, while npm start
  // said "service starting" (and PostgreSQL's failure on a taken EMBEDDED_PG_PORT came with its log and a stack).
  it("PORT, naming the process that holds it", async () => {
    await holding(undefined, async (port) => {
      await expectPortRefused("PORT", { ...(await freePorts()), PORT: String(port) }, new RegExp(`by pid ${process.pid} \\(`));
    });
  });

  it("EMBEDDED_PG_PORT and LOCAL_CHAIN_PORT, taken on the loopback address they listen on", async () => {
    await holding("127.0.0.1", async (port) => {
      await expectPortRefused("EMBEDDED_PG_PORT", { ...(await freePorts()), EMBEDDED_PG_PORT: String(port) }, new RegExp(`by pid ${process.pid} \\(`));
      await expectPortRefused("LOCAL_CHAIN_PORT", { ...(await freePorts()), LOCAL_CHAIN_PORT: String(port) }, new RegExp(`by pid ${process.pid} \\(`));
    });
  });

  /** A process whose command line names this checkout's server.ts, as the web server a killed supervisor leaves. */
  async function lookalikeWebServer(port: number) {
    const holder = spawn(
      process.execPath,
      ["-e", `require("node:net").createServer().listen(${port}, () => console.log("listening"))`, path.join(ROOT, "server.ts")],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    await new Promise<void>((resolve) => holder.stdout.once("data", () => resolve()));
    return holder;
  }

  it("PORT held by what looks like a web server of this checkout, once it did not let go within 5 s", async () => {
    const port = await freePort();
    const holder = await lookalikeWebServer(port);
    try {
      await expectPortRefused("PORT", { ...(await freePorts()), PORT: String(port) }, new RegExp(`by pid ${holder.pid} \\(.*, still after 5 s: `));
    } finally {
      holder.kill("SIGKILL");
    }
  });

  it("not PORT while a web server of this checkout holding it lets go within the wait: the start goes on", async () => {
    const port = await freePort();
    const holder = await lookalikeWebServer(port);
    // EMBEDDED_PG_PORT taken by this test: the start refuses it once it got past PORT, which ends the test there.
    await holding("127.0.0.1", async (pgPort) => {
      const env = { ...(await freePorts()), PORT: String(port), EMBEDDED_PG_PORT: String(pgPort), LOG_LEVEL: "warn" };
      const base = { ...process.env };
      for (const name of ["ADMIN_TOKEN", "RPC_URL", "DATABASE_URL", "CHAIN_ID", "RELAYER_PRIVATE_KEYS", "DEPLOYER_PRIVATE_KEY"]) delete base[name];
      const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "start.ts")], {
        cwd: ROOT,
        env: { ...base, DATA_DIR: dataDir, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stderr = "";
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      // Let go once the start says it waits (the log line), as the stopping web server does within a second.
      await new Promise<void>((resolve) =>
        child.stderr.on("data", (c: Buffer) => {
          stderr += c.toString();
          if (stderr.includes('"msg":"PORT is in use; waiting for it to be freed"')) resolve();
        }),
      );
      holder.kill("SIGKILL");
      expect(await exited, stderr).toBe(1);
      expect(stderr.trim().split("\n").at(-1)).toMatch(new RegExp(`^EMBEDDED_PG_PORT=${pgPort} is in use by pid ${process.pid} `));
    });
  });
});
