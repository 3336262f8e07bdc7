import type { Address } from "viem";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { ConfigError, type Config } from "@/lib/config";
import { writeFileDurably } from "@/lib/durable-file";

/**
 * Where the contracts are. REGISTRY_ADDRESS/TREASURY_ADDRESS (with CHAIN_ID) win; otherwise the local chain's
 * record, `<DATA_DIR>/deployment.json`, written by contracts/local-chain.ts when `npm start` runs without RPC_URL.
 */

export type Deployment = {
  /** From CHAIN_ID or the local record; undefined when only the addresses are configured (read it from the RPC). */
  chainId: number | undefined;
  registryAddress: Address;
  treasuryAddress: Address;
  /** Block of the deployment (a lower bound for log queries); known only for the local deployment. */
  deployBlock?: number;
  source: "environment" | "local";
};

const hex = z.string().regex(/^0x[0-9a-fA-F]*$/);
const address = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/)
  .transform((a) => a.toLowerCase() as Address);

const recordSchema = z.object({
  chainId: z.number().int().positive(),
  rpcUrl: z.string(),
  registryAddress: address,
  treasuryAddress: address,
  deployer: address,
  /** Block of the deployment transaction. */
  blockNumber: z.number().int().nonnegative(),
  transactionHash: hex,
  /** keccak256 of the runtime code found at each address right after deployment. */
  registryCodeHash: hex,
  treasuryCodeHash: hex,
  /** keccak256 of the treasury creation code the deployment used (detects a contracts change). */
  treasuryInitCodeHash: hex,
  deployedAt: z.string(),
});

/** The content of `<DATA_DIR>/deployment.json`. */
export type LocalDeploymentRecord = z.infer<typeof recordSchema>;

export function deploymentFile(dataDir: string): string {
  return path.join(dataDir, "deployment.json");
}

/** The recorded local deployment, or undefined when there is none or it cannot be read. */
export function readLocalDeployment(dataDir: string): LocalDeploymentRecord | undefined {
  const file = deploymentFile(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    const parsed = recordSchema.safeParse(JSON.parse(readFileSync(file, "utf8")));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Writes the record whole and durably (a reader never sees half a file, a power cut leaves the old or the new one). */
export function writeLocalDeployment(dataDir: string, record: LocalDeploymentRecord): void {
  writeFileDurably(deploymentFile(dataDir), JSON.stringify(record, null, 2) + "\n", 0o644);
}

/**
 * The deployment the app and the worker use, or undefined when no contracts are configured.
 * Throws ConfigError when only one of REGISTRY_ADDRESS/TREASURY_ADDRESS is set.
 */
export function resolveDeployment(config: Config): Deployment | undefined {
  if (config.registryAddress || config.treasuryAddress) {
    if (!config.registryAddress || !config.treasuryAddress) {
      const missing = config.registryAddress ? "TREASURY_ADDRESS" : "REGISTRY_ADDRESS";
      throw new ConfigError(`Invalid configuration: ${missing} is missing (REGISTRY_ADDRESS and TREASURY_ADDRESS go together)`);
    }
    return { chainId: config.chainId, registryAddress: config.registryAddress, treasuryAddress: config.treasuryAddress, source: "environment" };
  }
  const record = readLocalDeployment(config.dataDir);
  if (!record) return undefined;
  // A record of the local chain says nothing about another network.
  if (config.rpcUrl && normaliseUrl(config.rpcUrl) !== normaliseUrl(record.rpcUrl)) return undefined;
  if (config.chainId !== undefined && config.chainId !== record.chainId) return undefined;
  return {
    chainId: record.chainId,
    registryAddress: record.registryAddress,
    treasuryAddress: record.treasuryAddress,
    deployBlock: record.blockNumber,
    source: "local",
  };
}

function normaliseUrl(url: string): string {
  try {
    const u = new URL(url);
    const host = u.hostname === "localhost" ? "127.0.0.1" : u.hostname;
    return `${u.protocol}//${host}:${u.port}${u.pathname.replace(/\/$/, "")}`;
  } catch {
    return url;
  }
}
