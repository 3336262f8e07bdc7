import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { privateKeyToAccount } from "viem/accounts";
import { startAnvil } from "@/contracts/anvil";
import { deployContracts } from "@/contracts/deploy-lib";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import type { Address } from "@/lib/sponsorship/address";
import { freePort } from "@/test/ports";

/**
 * A private anvil with the contracts deployed, for the probes that run one real worker outside a stack
 * (bench/worker-cpu.ts, bench/statements.ts): the first `relayers` of anvil's keys authorised, the treasury funded
 * for `sponsorships` of `sponsorAmountWei` (and ten more), and the environment a worker needs to reach them.
 */
export type ProbeChain = {
  pid: number;
  rpcUrl: string;
  /** RPC_URL, CHAIN_ID, REGISTRY_ADDRESS, TREASURY_ADDRESS, RELAYER_PRIVATE_KEYS. */
  env: Record<string, string>;
  stop: () => Promise<void>;
};

export async function startProbeChain(options: {
  name: string;
  blockTime: number;
  relayers: number;
  sponsorAmountWei: bigint;
  sponsorships: number;
}): Promise<ProbeChain> {
  const dataDir = await mkdtemp(path.join(tmpdir(), `${options.name}-anvil-`));
  const anvil = await startAnvil({ port: await freePort(), blockTime: options.blockTime, dataDir });
  const stop = async () => {
    await anvil.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const relayerKeys = LOCAL_RELAYER_KEYS.slice(0, options.relayers) as `0x${string}`[];
    const deployment = await deployContracts({
      rpcUrl: anvil.rpcUrl,
      deployerKey: LOCAL_DEPLOYER_KEY,
      relayers: relayerKeys.map((k) => privateKeyToAccount(k).address.toLowerCase() as Address),
      sponsorAmountWei: options.sponsorAmountWei,
      fundWei: options.sponsorAmountWei * BigInt(options.sponsorships + 10),
      pollingIntervalMs: 50,
    });
    return {
      pid: anvil.pid,
      rpcUrl: anvil.rpcUrl,
      env: {
        RPC_URL: anvil.rpcUrl,
        CHAIN_ID: String(deployment.chainId),
        REGISTRY_ADDRESS: deployment.registryAddress,
        TREASURY_ADDRESS: deployment.treasuryAddress,
        RELAYER_PRIVATE_KEYS: relayerKeys.join(","),
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
