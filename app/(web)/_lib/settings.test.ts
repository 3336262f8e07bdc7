import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { startAnvil } from "@/contracts/anvil";
import { parseConfig } from "@/lib/config";
import { freePort } from "@/test/ports";
import { getPublicSettings, walletRpcUrl } from "./settings";

const config = (env: Record<string, string>) => parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", ...env });

describe("the RPC URL offered to browser wallets (Add <network> to your wallet)", () => {
  it("is PUBLIC_RPC_URL when set", () => {
    expect(walletRpcUrl(config({ PUBLIC_RPC_URL: "https://rpc.example.org", RPC_URL: "https://rpc.provider.example/KEY" }))).toBe("https://rpc.example.org");
  });

  it("is the local chain's loopback RPC_URL when PUBLIC_RPC_URL is unset (npm start's own chain)", () => {
    expect(walletRpcUrl(config({ RPC_URL: "http://127.0.0.1:8545" }))).toBe("http://127.0.0.1:8545");
  });

  it("is none for a remote RPC_URL without PUBLIC_RPC_URL: RPC_URL may carry a provider key", () => {
    expect(
      walletRpcUrl(config({ RPC_URL: "https://rpc.provider.example/KEY", CHAIN_ID: "11155111", RELAYER_PRIVATE_KEYS: "0x" + "11".repeat(32) })),
    ).toBeNull();
    expect(walletRpcUrl(config({}))).toBeNull();
  });

  it("refuses a PUBLIC_RPC_URL that is not http(s), naming the variable", () => {
    expect(() => config({ PUBLIC_RPC_URL: "ws://rpc.example.org" })).toThrow(/PUBLIC_RPC_URL/);
  });
});

describe("the chain the pages give the browser wallet", () => {
  it("is the RPC's own chain when CHAIN_ID is unset (its default), not the local chain's id", async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), "settings-anvil-"));
    const anvil = await startAnvil({ port: await freePort(), blockTime: 0, dataDir, chainId: 11155111 });
    try {
      const settings = await getPublicSettings(config({ RPC_URL: anvil.rpcUrl }));
      expect(settings).toEqual({ explorerUrl: null, chainId: 11155111, walletRpcUrl: anvil.rpcUrl });
    } finally {
      await anvil.stop();
      await rm(dataDir, { recursive: true, force: true });
    }
    // The RPC gone, its answer is remembered (a chain's id does not change): asked with another fee ceiling, so the
    // chain check's cache (keyed by it) does not answer for it.
    expect((await getPublicSettings(config({ RPC_URL: anvil.rpcUrl, MAX_FEE_PER_GAS_GWEI: "7" }))).chainId).toBe(11155111);
  });

  it("is CHAIN_ID when set, without asking the RPC", async () => {
    const settings = await getPublicSettings(config({ RPC_URL: `http://127.0.0.1:${await freePort()}`, CHAIN_ID: "17000" }));
    expect(settings.chainId).toBe(17000);
  });

  it("is unknown while the RPC does not answer and CHAIN_ID is unset: no Add network is offered", async () => {
    const settings = await getPublicSettings(config({ RPC_URL: `http://127.0.0.1:${await freePort()}` }));
    expect(settings).toEqual({ explorerUrl: null, chainId: null, walletRpcUrl: null });
  });
});
