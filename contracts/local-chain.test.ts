import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { createPublicClient, getAddress, http, parseEther, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { registryAbi } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients } from "@/lib/chain/clients";
import { readLocalDeployment } from "@/lib/chain/deployment";
import { requestIdHash } from "@/lib/chain/ids";
import { ConfigError, LOCAL_RELAYER_KEYS, parseConfig } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { freePort } from "@/test/ports";
import { startAnvil } from "./anvil";
import { ensureLocalChain, historyStatesFor, type LocalChain } from "./local-chain";

const logger = createLogger();
let dataDir: string;
let port: number;
const running: LocalChain[] = [];

function configFor(env: Record<string, string> = {}) {
  return parseConfig({ DATA_DIR: dataDir, LOCAL_CHAIN_PORT: String(port), LOCAL_BLOCK_TIME: "0", ...env });
}

async function start(env: Record<string, string> = {}): Promise<LocalChain> {
  const chain = await ensureLocalChain({ config: configFor(env), logger });
  running.push(chain);
  return chain;
}

async function stop(chain: LocalChain): Promise<void> {
  await chain.stop();
  running.splice(running.indexOf(chain), 1);
}

function independentClient(rpcUrl: string) {
  return createPublicClient({ transport: http(rpcUrl), pollingInterval: 50 });
}

async function sponsorOnce(chain: LocalChain, wallet: `0x${string}`) {
  const clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: chain.chainId, pollingIntervalMs: 50 });
  const hash = await clients.walletClient(LOCAL_RELAYER_KEYS[0]!).writeContract({
    address: chain.treasuryAddress,
    abi: treasuryAbi,
    functionName: "sponsor",
    args: [wallet, requestIdHash(crypto.randomUUID())],
  });
  expect((await clients.waitForTransactionReceipt({ hash })).status).toBe("success");
}

/**
 * Holds `port` with a listener that answers no connection: a process that never accepts (here blocked for good),
 * whose accept queue is full. A connection to the port then times out.
 */
async function holdPortUnanswered(port: number): Promise<{ release: () => void }> {
  const holder = spawn(
    process.execPath,
    [
      "-e",
      `require("node:net").createServer().listen({ port: ${port}, host: "127.0.0.1", backlog: 1 }, () => {
        console.log("listening");
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      })`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  await new Promise((resolve) => holder.stdout.once("data", resolve));
  // A backlog of 1 queues two connections (Linux); the kernel drops the handshake of any further one.
  const fillers: Socket[] = [];
  for (let i = 0; i < 2; i++) {
    const socket = connect({ host: "127.0.0.1", port });
    fillers.push(socket);
    await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  }
  return {
    release: () => {
      for (const socket of fillers) socket.destroy();
      holder.kill("SIGKILL");
    },
  };
}

/**
 * Holds a free port bound but not listening, as a server between its bind and its listen: a connection is refused, so
 * the port check finds the port free, while anvil cannot bind it: what a start sees when another process takes the
 * port between the check and anvil binding it. Perl (Debian's perl-base is essential) binds without SO_REUSEADDR,
 * which Node always sets and which would let anvil bind beside it; without it, a port some connection left in
 * TIME_WAIT cannot be bound either, so the next free port is tried.
 */
async function holdPortBound(): Promise<{ port: number; release: () => void }> {
  for (let tries = 0; tries < 10; tries++) {
    const port = await freePort();
    const holder = spawn(
      "perl",
      [
        "-MSocket",
        "-e",
        `socket(my $s, PF_INET, SOCK_STREAM, 0) or die $!; bind($s, pack_sockaddr_in(${port}, inet_aton("127.0.0.1"))) or exit 1;
         $| = 1; print "bound\n"; sleep 600`,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const bound = await new Promise<boolean>((resolve) => {
      holder.stdout.once("data", () => resolve(true));
      holder.once("exit", () => resolve(false));
    });
    if (bound) return { port, release: () => holder.kill("SIGKILL") };
  }
  throw new Error("no port could be held");
}

const freshWallet = () => privateKeyToAccount(generatePrivateKey()).address;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-local-chain-"));
  port = await freePort();
});

afterEach(async () => {
  for (const chain of running.splice(0)) await chain.stop();
});

afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe("ensureLocalChain", () => {
  it("comes up with the contracts deployed, funded and the relayers authorised; isSponsored is false for a fresh address", async () => {
    const chain = await start();
    expect(chain.deployed).toBe(true);
    expect(chain.chainId).toBe(31337);

    const client = independentClient(chain.rpcUrl);
    expect(await client.readContract({ address: chain.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [freshWallet()] })).toBe(false);
    expect(await client.getBalance({ address: chain.treasuryAddress })).toBe(parseEther("10000"));
    expect(await client.readContract({ address: chain.treasuryAddress, abi: treasuryAbi, functionName: "amount" })).toBe(10n ** 16n);
    for (const key of LOCAL_RELAYER_KEYS) {
      const relayer = privateKeyToAccount(key).address;
      expect(await client.readContract({ address: chain.treasuryAddress, abi: treasuryAbi, functionName: "isRelayer", args: [relayer] })).toBe(true);
    }
    expect(getAddress(await client.readContract({ address: chain.treasuryAddress, abi: treasuryAbi, functionName: "registry" }))).toBe(
      getAddress(chain.registryAddress),
    );

    const record = readLocalDeployment(dataDir);
    expect(record).toMatchObject({
      chainId: 31337,
      rpcUrl: chain.rpcUrl,
      registryAddress: chain.registryAddress,
      treasuryAddress: chain.treasuryAddress,
      blockNumber: chain.deployBlock,
    });
    expect(existsSync(path.join(dataDir, "anvil", "anvil.pid"))).toBe(true);
  });

  it("a restart reuses the recorded deployment and keeps the chain's state", async () => {
    const first = await start();
    const wallet = freshWallet();
    await sponsorOnce(first, wallet);
    await stop(first);
    expect(existsSync(path.join(dataDir, "anvil", "anvil.pid"))).toBe(false);

    const second = await start();
    expect(second.deployed).toBe(false);
    expect(second.treasuryAddress).toBe(first.treasuryAddress);
    expect(second.registryAddress).toBe(first.registryAddress);
    const client = independentClient(second.rpcUrl);
    expect(await client.readContract({ address: second.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] })).toBe(true);
  });

  it("a reset chain (state gone) gets a fresh deployment", async () => {
    const first = await start();
    const wallet = freshWallet();
    await sponsorOnce(first, wallet);
    await stop(first);
    rmSync(path.join(dataDir, "anvil", "state.json"));

    const second = await start();
    expect(second.deployed).toBe(true);
    const client = independentClient(second.rpcUrl);
    expect(await client.getBytecode({ address: second.treasuryAddress })).toMatch(/^0x[0-9a-f]{100,}/);
    expect(await client.readContract({ address: second.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] })).toBe(false);
    expect(readLocalDeployment(dataDir)?.blockNumber).toBe(second.deployBlock);
  });

  it("an anvil left running by a killed start is stopped by its pid and the chain comes back", async () => {
    const orphan = await start();
    const pid = orphan.pid;
    const wallet = freshWallet();
    await sponsorOnce(orphan, wallet);
    // The supervisor died without cleanup: the orphan still runs and the pid file still names it.
    running.splice(running.indexOf(orphan), 1);
    expect(readFileSync(path.join(dataDir, "anvil", "anvil.pid"), "utf8")).toBe(String(pid));

    const next = await start();
    expect(next.pid).not.toBe(pid);
    expect(() => process.kill(pid, 0)).toThrow();
    expect(next.deployed).toBe(false);
    const client = independentClient(next.rpcUrl);
    expect(await client.readContract({ address: next.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] })).toBe(true);
  });

  it("an anvil left running whose directory was removed (a reset) is found by its command line and killed without writing the old chain back", async () => {
    const env = { DATA_DIR: path.join(dataDir, "orphan-reset"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const orphan = await start(env);
    const pid = orphan.pid;
    const wallet = freshWallet();
    await sponsorOnce(orphan, wallet);
    running.splice(running.indexOf(orphan), 1);
    rmSync(path.join(env.DATA_DIR, "anvil"), { recursive: true, force: true });

    // Before: nothing named it, the port check took it for ours and let it be, and the start failed on the port.
    const next = await start(env);
    expect(next.pid).not.toBe(pid);
    expect(() => process.kill(pid, 0)).toThrow();
    // A fresh chain: the old one's dump at a SIGTERM would have come back into the directory made again.
    expect(next.deployed).toBe(true);
    const client = independentClient(next.rpcUrl);
    expect(await client.readContract({ address: next.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] })).toBe(false);
  });

  it("with LOCAL_BLOCK_TIME=1 the chain mines a block every second, empty or not", async () => {
    const chain = await start({ LOCAL_BLOCK_TIME: "1" });
    const client = independentClient(chain.rpcUrl);
    const first = await client.getBlockNumber({ cacheTime: 0 });
    const deadline = Date.now() + 10_000;
    let now = first;
    while (now < first + 2n && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      now = await client.getBlockNumber({ cacheTime: 0 });
    }
    expect(now).toBeGreaterThanOrEqual(first + 2n);
  });

  it("with 1-s blocks anvil keeps only the last few states (issue 11, item 10: not one full copy a second), and a restart keeps the chain", async () => {
    const chain = await start({ LOCAL_BLOCK_TIME: "1" });
    const wallet = freshWallet();
    await sponsorOnce(chain, wallet);
    const client = independentClient(chain.rpcUrl);
    const account = privateKeyToAccount(LOCAL_RELAYER_KEYS[0]!).address;
    const first = await client.getBlockNumber({ cacheTime: 0 });
    const kept = historyStatesFor(1);
    // Blocks are mined every second; wait (bounded) until the first block is further back than the kept states.
    const deadline = Date.now() + 30_000;
    let head = first;
    while (head < first + BigInt(kept + 3) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      head = await client.getBlockNumber({ cacheTime: 0 });
    }
    expect(head).toBeGreaterThanOrEqual(first + BigInt(kept + 3));
    // A recent past state answers (the worker reads nonces CONFIRMATIONS - 1 below the head) ...
    expect(await client.getBalance({ address: account, blockNumber: head - 2n })).toBeGreaterThan(0n);
    // ... an older one was dropped: anvil no longer holds a copy of the whole state for every block.
    await expect(client.getBalance({ address: account, blockNumber: first })).rejects.toThrow();

    await stop(chain);
    const again = await start({ LOCAL_BLOCK_TIME: "1" });
    expect(again.deployed).toBe(false);
    expect(
      await independentClient(again.rpcUrl).readContract({ address: again.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] }),
    ).toBe(true);
  });

  it("custom relayer keys are credited and authorised on the local chain", async () => {
    const key = generatePrivateKey();
    const relayer = privateKeyToAccount(key).address;
    const chain = await start({ RELAYER_PRIVATE_KEYS: key, SPONSOR_AMOUNT_WEI: "12345" });
    const client = independentClient(chain.rpcUrl);
    expect(await client.readContract({ address: chain.treasuryAddress, abi: treasuryAbi, functionName: "isRelayer", args: [relayer] })).toBe(true);
    expect(await client.getBalance({ address: relayer })).toBeGreaterThan(0n);
    expect(await client.readContract({ address: chain.treasuryAddress, abi: treasuryAbi, functionName: "amount" })).toBe(12345n);
  });

  it("a start that fails for another reason than its saved state (the port taken after it was checked) keeps the state and fails", async () => {
    const env = { DATA_DIR: path.join(dataDir, "port-taken"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const first = await start(env);
    const wallet = freshWallet();
    await sponsorOnce(first, wallet);
    await stop(first);
    const anvilDir = path.join(env.DATA_DIR, "anvil");
    const state = path.join(anvilDir, "state.json");
    const saved = readFileSync(state, "utf8");

    const holder = await holdPortBound();
    let error: unknown;
    try {
      // The state does not depend on the port: this start is on the held one.
      const config = configFor({ ...env, LOCAL_CHAIN_PORT: String(holder.port) });
      error = await ensureLocalChain({ config, logger }).catch((e: unknown) => e);
    } finally {
      holder.release();
    }
    // Before: every failure was taken for a refused state file, moved aside, and a fresh chain tried.
    expect(existsSync(state)).toBe(true);
    expect(readFileSync(state, "utf8")).toBe(saved);
    expect(readdirSync(anvilDir).filter((name) => name.startsWith("state.json."))).toEqual([]);
    // It got past the port check: anvil itself could not bind.
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ConfigError);
    expect((error as Error).message).toContain("Address already in use");

    // The next attempt, on a free port, continues the same chain.
    const again = await start(env);
    expect(again.deployed).toBe(false);
    expect(
      await independentClient(again.rpcUrl).readContract({ address: again.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] }),
    ).toBe(true);
  });

  it("a state file anvil refuses (JSON that is not a state dump) is moved aside and a fresh chain deployed; older refused states beyond the newest three are removed", async () => {
    const env = { DATA_DIR: path.join(dataDir, "refused-state"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const anvilDir = path.join(env.DATA_DIR, "anvil");
    mkdirSync(anvilDir, { recursive: true });
    writeFileSync(path.join(anvilDir, "state.json"), '{"accounts":{}}');
    // Three refused before, the oldest with its good copies: with the new one, the oldest set goes.
    const earlier = [
      "state.json.rejected-1000",
      "state.json.rejected-1000.good",
      "state.json.rejected-1000.good-refused",
      "state.json.rejected-2000",
      "state.json.rejected-3000.good-refused",
    ];
    for (const name of earlier) writeFileSync(path.join(anvilDir, name), "{}");

    const chain = await start(env);
    expect(chain.deployed).toBe(true);
    const aside = readdirSync(anvilDir).filter((name) => name.startsWith("state.json.rejected-") && !earlier.includes(name));
    expect(aside).toHaveLength(1);
    expect(readFileSync(path.join(anvilDir, aside[0]!), "utf8")).toBe('{"accounts":{}}');
    expect(
      readdirSync(anvilDir)
        .filter((name) => earlier.includes(name))
        .sort(),
    ).toEqual(["state.json.rejected-2000", "state.json.rejected-3000.good-refused"]);
  });

  it("a state file cut short (anvil killed while it wrote it) gives way to the state anvil last started from: the chain and its deployment come back", async () => {
    const env = { DATA_DIR: path.join(dataDir, "cut-state"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const state = path.join(env.DATA_DIR, "anvil", "state.json");
    const first = await start(env);
    const before = freshWallet();
    await sponsorOnce(first, before);
    await stop(first);
    // Started from the state that holds `before`: that is now the last good one.
    const second = await start(env);
    expect(existsSync(`${state}.good`)).toBe(true);
    const after = freshWallet();
    await sponsorOnce(second, after);
    await stop(second);
    // As a kill in the middle of a periodic dump leaves it (anvil writes in place, truncating first).
    const whole = readFileSync(state);
    writeFileSync(state, whole.subarray(0, Math.floor(whole.length / 2)));

    // Before: moved aside, a fresh chain, the contracts deployed again, `before` unpaid on it.
    const third = await start(env);
    expect(third.deployed).toBe(false);
    expect(third.treasuryAddress).toBe(second.treasuryAddress);
    const client = independentClient(third.rpcUrl);
    const sponsored = (wallet: Address) =>
      client.readContract({ address: third.registryAddress, abi: registryAbi, functionName: "isSponsored", args: [wallet] });
    expect(await sponsored(before)).toBe(true);
    // After the last start: lost with the cut dump, as after a fresh chain (npm start replays what its database holds).
    expect(await sponsored(after)).toBe(false);
    expect(readFileSync(`${state}.corrupt`).length).toBe(Math.floor(whole.length / 2));
  });

  it("a reset (state.json removed) takes the last good copy with it: a state file cut short after it does not bring the old chain back", async () => {
    const env = { DATA_DIR: path.join(dataDir, "reset-good"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const state = path.join(env.DATA_DIR, "anvil", "state.json");
    const first = await start(env);
    const wallet = freshWallet();
    await sponsorOnce(first, wallet);
    await stop(first);
    await stop(await start(env)); // the state holding `wallet` is now the last good one
    rmSync(state);
    const reset = await start(env);
    expect(reset.deployed).toBe(true);
    expect(existsSync(`${state}.good`)).toBe(false);
    await stop(reset);
    writeFileSync(state, "cut short");

    const next = await start(env);
    const sponsored = await independentClient(next.rpcUrl).readContract({
      address: next.registryAddress,
      abi: registryAbi,
      functionName: "isSponsored",
      args: [wallet],
    });
    expect(sponsored).toBe(false);
  });

  it("a state file anvil refuses gives way to the state anvil last started from, and a fresh chain only when that is refused too", async () => {
    const env = { DATA_DIR: path.join(dataDir, "refused-good"), LOCAL_CHAIN_PORT: String(await freePort()) };
    const anvilDir = path.join(env.DATA_DIR, "anvil");
    const state = path.join(anvilDir, "state.json");
    const first = await start(env);
    const wallet = freshWallet();
    await sponsorOnce(first, wallet);
    await stop(first);
    await stop(await start(env)); // the state holding `wallet` is now the last good one
    writeFileSync(state, '{"accounts":{}}');
    // Three refused before: restored from the good copy, the oldest goes too (a disk that spoils the state at every
    // start must not fill up with them).
    for (const time of [1000, 2000, 3000]) writeFileSync(path.join(anvilDir, `state.json.rejected-${time}`), "{}");

    const restored = await start(env);
    expect(restored.deployed).toBe(false);
    expect(readdirSync(anvilDir).filter((name) => /^state\.json\.rejected-[23]000$/.test(name))).toHaveLength(2);
    expect(existsSync(path.join(anvilDir, "state.json.rejected-1000"))).toBe(false);
    expect(
      await independentClient(restored.rpcUrl).readContract({
        address: restored.registryAddress,
        abi: registryAbi,
        functionName: "isSponsored",
        args: [wallet],
      }),
    ).toBe(true);
    await stop(restored);

    writeFileSync(state, '{"accounts":{}}');
    writeFileSync(`${state}.good`, '{"accounts":{},"blocks":[]}');
    const fresh = await start(env);
    expect(fresh.deployed).toBe(true);
    expect(existsSync(`${state}.good`)).toBe(false);
  });

  it("refuses with one line naming LOCAL_CHAIN_PORT when the port's holder answers no connection (the check's connect times out)", async () => {
    const busyPort = await freePort();
    const holder = await holdPortUnanswered(busyPort);
    try {
      const config = configFor({ LOCAL_CHAIN_PORT: String(busyPort), DATA_DIR: path.join(dataDir, "unanswered") });
      const error = await ensureLocalChain({ config, logger }).catch((e: unknown) => e);
      // Before: the timeout was read as a free port, and the start failed later, on anvil's own bind error.
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(
        /^LOCAL_CHAIN_PORT=\d+ is in use by .*: stop it, or set LOCAL_CHAIN_PORT to a free port, or RPC_URL to use a running chain$/,
      );
    } finally {
      holder.release();
    }
  });

  it("leaves alone a live anvil that anvil.pid names when it is not this data directory's (another chain's, its pid reused)", async () => {
    const other = await startAnvil({ port: await freePort(), blockTime: 0, dataDir: path.join(dataDir, "other-chain") });
    try {
      const env = { DATA_DIR: path.join(dataDir, "reused-pid"), LOCAL_CHAIN_PORT: String(await freePort()) };
      mkdirSync(path.join(env.DATA_DIR, "anvil"), { recursive: true });
      writeFileSync(path.join(env.DATA_DIR, "anvil", "anvil.pid"), String(other.pid));
      const chain = await start(env);
      expect(chain.pid).not.toBe(other.pid);
      // Before: any anvil was taken for ours and stopped.
      expect(other.process.exitCode === null && other.process.signalCode === null).toBe(true);
      expect(await independentClient(other.rpcUrl).getChainId()).toBe(31337);
    } finally {
      await other.stop();
    }
  });

  it("refuses with one line naming LOCAL_CHAIN_PORT when the port is taken by another process", async () => {
    const busyPort = await freePort();
    const server = createServer().listen(busyPort, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    try {
      const error = await ensureLocalChain({ config: configFor({ LOCAL_CHAIN_PORT: String(busyPort), DATA_DIR: path.join(dataDir, "busy") }), logger }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(
        /^LOCAL_CHAIN_PORT=\d+ is in use by .*: stop it, or set LOCAL_CHAIN_PORT to a free port, or RPC_URL to use a running chain$/,
      );
      expect((error as Error).message).not.toContain("\n");
    } finally {
      server.close();
    }
  });
});
