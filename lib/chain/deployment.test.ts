import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "@/lib/config";
import { readLocalDeployment, resolveDeployment, writeLocalDeployment, type LocalDeploymentRecord } from "./deployment";

let dataDir: string;
const registry = "0x1111111111111111111111111111111111111111";
const treasury = "0x2222222222222222222222222222222222222222";
const record: LocalDeploymentRecord = {
  chainId: 31337,
  rpcUrl: "http://127.0.0.1:8545",
  registryAddress: "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  treasuryAddress: "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
  deployer: "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
  blockNumber: 1,
  transactionHash: "0x01",
  registryCodeHash: "0x02",
  treasuryCodeHash: "0x03",
  treasuryInitCodeHash: "0x04",
  deployedAt: "2026-01-01T00:00:00.000Z",
};

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-deployment-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe("resolveDeployment", () => {
  it("is undefined when no addresses are configured and nothing was deployed locally", () => {
    expect(resolveDeployment(parseConfig({ DATA_DIR: path.join(dataDir, "empty") }))).toBeUndefined();
  });

  it("takes REGISTRY_ADDRESS, TREASURY_ADDRESS and CHAIN_ID from the environment first", () => {
    writeLocalDeployment(dataDir, record);
    const config = parseConfig({ DATA_DIR: dataDir, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: treasury.toUpperCase().replace("0X", "0x"), CHAIN_ID: "5" });
    expect(resolveDeployment(config)).toEqual({ chainId: 5, registryAddress: registry, treasuryAddress: treasury, source: "environment" });
  });

  it("refuses one address without the other, naming the missing variable", () => {
    expect(() => resolveDeployment(parseConfig({ DATA_DIR: dataDir, REGISTRY_ADDRESS: registry }))).toThrow(ConfigError);
    expect(() => resolveDeployment(parseConfig({ DATA_DIR: dataDir, REGISTRY_ADDRESS: registry }))).toThrow(/TREASURY_ADDRESS/);
  });

  it("falls back to <DATA_DIR>/deployment.json written by the local chain", () => {
    writeLocalDeployment(dataDir, record);
    expect(readLocalDeployment(dataDir)).toEqual(record);
    expect(resolveDeployment(parseConfig({ DATA_DIR: dataDir }))).toEqual({
      chainId: 31337,
      registryAddress: record.registryAddress,
      treasuryAddress: record.treasuryAddress,
      deployBlock: 1,
      source: "local",
    });
    expect(resolveDeployment(parseConfig({ DATA_DIR: dataDir, RPC_URL: "http://localhost:8545/" }))?.source).toBe("local");
  });

  it("ignores the local record for another RPC or chain", () => {
    writeLocalDeployment(dataDir, record);
    expect(resolveDeployment(parseConfig({ DATA_DIR: dataDir, RPC_URL: "https://rpc.example.org" }))).toBeUndefined();
    expect(resolveDeployment(parseConfig({ DATA_DIR: dataDir, CHAIN_ID: "1" }))).toBeUndefined();
  });
});
