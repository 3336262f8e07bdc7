import { spawn } from "node:child_process";
import path from "node:path";
import { createPublicClient, http, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registryAbi } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { LOCAL_DEPLOYER_KEY, LOCAL_DEV_KEYS, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { startRpcProxy } from "@/test/rpc-proxy";
import type { Anvil } from "./anvil";

/** `npm run contracts:deploy` as an operator runs it: a separate process, its environment, its output. */

const ROOT = path.resolve(import.meta.dirname, "..");
let chain: Anvil;

type Run = { code: number | null; stdout: string; stderr: string };

function runDeploy(env: Record<string, string>, args: string[] = []): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "contracts", "deploy.ts"), ...args], {
      cwd: ROOT,
      // Only what an operator would set: nothing inherited from the test's own environment.
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", LOG_LEVEL: "silent", ...env } as unknown as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.once("error", reject);
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

function expectOneLineRefusal(run: Run, pattern: RegExp) {
  expect(run.code).toBe(1);
  expect(run.stdout).toBe("");
  const lines = run.stderr.trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(run.stderr).not.toMatch(/\bat .+:\d+:\d+/); // no stack trace
}

beforeAll(async () => {
  chain = await startTestChain();
});

afterAll(async () => {
  await chain?.stop();
});

const relayerKeys = LOCAL_RELAYER_KEYS.slice(0, 2).join(",");

describe("contracts:deploy", () => {
  it("refuses without DEPLOYER_PRIVATE_KEY, in one line", async () => {
    expectOneLineRefusal(await runDeploy({ RPC_URL: chain.rpcUrl, RELAYER_PRIVATE_KEYS: relayerKeys }), /DEPLOYER_PRIVATE_KEY is not set/);
  });

  it("refuses without RPC_URL, in one line", async () => {
    expectOneLineRefusal(await runDeploy({ DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY, RELAYER_PRIVATE_KEYS: relayerKeys }), /RPC_URL is not set/);
  });

  it("refuses an RPC_URL that cannot be reached, in one line, without the URL's path (a provider's key)", async () => {
    // A port nothing listens on; the path stands for a provider's key.
    const url = `http://127.0.0.1:${await freePort()}/v2/SECRETKEY`;
    const run = await runDeploy({ RPC_URL: url, DEPLOYER_PRIVATE_KEY: generatePrivateKey(), RELAYER_PRIVATE_KEYS: generatePrivateKey() });
    expectOneLineRefusal(run, /^contracts:deploy: RPC_URL http:\/\/127\.0\.0\.1:\d+\/\[redacted\] cannot be reached/);
    expect(run.stderr).not.toContain("SECRETKEY");
  });

  it("with RPC_BATCH_SIZE at a provider's batch limit, sends no larger batch and completes", async () => {
    let refused = 0;
    // A provider that refuses a batch of more than 2 calls as a whole (HTTP 200, one JSON-RPC error).
    const limited = await startRpcProxy(chain.rpcUrl, (body) => {
      const parsed = JSON.parse(body) as unknown;
      if (!Array.isArray(parsed) || parsed.length <= 2) return undefined;
      refused++;
      return { status: 200, body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "batch too large" } }) };
    });
    try {
      const run = await runDeploy({
        RPC_URL: limited.url,
        RPC_BATCH_SIZE: "2",
        // An account of its own: the later tests count the deployer's balance.
        DEPLOYER_PRIVATE_KEY: LOCAL_DEV_KEYS[4],
        // Three relayers: their balances, read together after the deployment, were one batch of three.
        RELAYER_PRIVATE_KEYS: LOCAL_RELAYER_KEYS.slice(0, 3).join(","),
      });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^TREASURY_ADDRESS=0x[0-9a-f]{40}$/m);
      expect(refused).toBe(0);
    } finally {
      await limited.close();
    }
  });

  it("refuses a malformed key, naming the variable", async () => {
    expectOneLineRefusal(await runDeploy({ RPC_URL: chain.rpcUrl, DEPLOYER_PRIVATE_KEY: "0x1234", RELAYER_PRIVATE_KEYS: relayerKeys }), /DEPLOYER_PRIVATE_KEY/);
  });

  it("refuses when CHAIN_ID differs from the chain RPC_URL serves", async () => {
    // Keys of its own: anvil's well-known keys are refused outright with a chain id other than 31337 (lib/config.ts).
    expectOneLineRefusal(
      await runDeploy({ RPC_URL: chain.rpcUrl, CHAIN_ID: "1", DEPLOYER_PRIVATE_KEY: generatePrivateKey(), RELAYER_PRIVATE_KEYS: generatePrivateKey() }),
      /CHAIN_ID is 1 but RPC_URL serves chain 31337/,
    );
  });

  it("refuses an unfunded deployer before sending anything", async () => {
    const key = generatePrivateKey();
    const run = await runDeploy({ RPC_URL: chain.rpcUrl, DEPLOYER_PRIVATE_KEY: key, RELAYER_PRIVATE_KEYS: relayerKeys });
    expectOneLineRefusal(run, /deployer 0x[0-9a-f]{40} has no native token on chain 31337/);
    const client = createPublicClient({ transport: http(chain.rpcUrl) });
    expect(await client.getTransactionCount({ address: privateKeyToAccount(key).address })).toBe(0);
  });

  it("refuses a deployer that cannot pay for the funding it was asked to send", async () => {
    const run = await runDeploy({ RPC_URL: chain.rpcUrl, DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY, RELAYER_PRIVATE_KEYS: relayerKeys }, ["--fund", "5000000"]);
    expectOneLineRefusal(run, /deployer 0x[0-9a-f]{40} has 1000000 on chain 31337 but needs about 5000000/);
  });

  it("deploys, authorises the relayers, funds with --fund and prints the addresses to configure", async () => {
    const run = await runDeploy(
      { RPC_URL: chain.rpcUrl, CHAIN_ID: "31337", DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY, RELAYER_PRIVATE_KEYS: relayerKeys, SPONSOR_AMOUNT_WEI: "5000" },
      ["--fund", "2.5"],
    );
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const registry = /^REGISTRY_ADDRESS=(0x[0-9a-f]{40})$/m.exec(run.stdout)?.[1] as `0x${string}` | undefined;
    const treasury = /^TREASURY_ADDRESS=(0x[0-9a-f]{40})$/m.exec(run.stdout)?.[1] as `0x${string}` | undefined;
    expect(run.stdout).toMatch(/^CHAIN_ID=31337$/m);
    expect(registry).toBeDefined();
    expect(treasury).toBeDefined();

    const client = createPublicClient({ transport: http(chain.rpcUrl) });
    expect(await client.getBalance({ address: treasury! })).toBe(parseEther("2.5"));
    expect(await client.readContract({ address: treasury!, abi: treasuryAbi, functionName: "amount" })).toBe(5000n);
    expect((await client.readContract({ address: treasury!, abi: treasuryAbi, functionName: "registry" })).toLowerCase()).toBe(registry);
    expect((await client.readContract({ address: treasury!, abi: treasuryAbi, functionName: "owner" })).toLowerCase()).toBe(
      privateKeyToAccount(LOCAL_DEPLOYER_KEY).address.toLowerCase(),
    );
    for (const key of LOCAL_RELAYER_KEYS.slice(0, 2)) {
      expect(await client.readContract({ address: treasury!, abi: treasuryAbi, functionName: "isRelayer", args: [privateKeyToAccount(key).address] })).toBe(
        true,
      );
    }
    expect(
      await client.readContract({
        address: treasury!,
        abi: treasuryAbi,
        functionName: "isRelayer",
        args: [privateKeyToAccount(LOCAL_RELAYER_KEYS[2]!).address],
      }),
    ).toBe(false);
    expect(await client.readContract({ address: registry!, abi: registryAbi, functionName: "treasury" })).toMatch(new RegExp(treasury!, "i"));
  });
});
