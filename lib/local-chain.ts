import type { Hex } from "viem";
import type { Config } from "./config";

/**
 * The local development chain (anvil, `npm start`'s default): its well-known keys and chain id, and the rule that
 * refuses them anywhere else (issue 11, item 8). lib/config.ts applies it when it parses the environment;
 * `npm start` and the worker apply it again once the chain has told its id.
 */

/** Anvil's well-known development accounts (mnemonic "test test ... junk"). Never use them on a real network. */
export const LOCAL_DEV_KEYS = [
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
  "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
  "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
] as const satisfies readonly Hex[];

/** On the local chain, account 0 deploys and owns the contracts; accounts 1-4 relay. */
export const LOCAL_DEPLOYER_KEY = LOCAL_DEV_KEYS[0];
export const LOCAL_RELAYER_KEYS = LOCAL_DEV_KEYS.slice(1);

/** The local development chain's id (anvil's default). */
export const LOCAL_CHAIN_ID = 31337;

/** Whether every endpoint of an RPC_URL value (one URL or several, comma-separated) is on this host. */
export function isLoopbackRpcUrl(rpcUrl: string): boolean {
  return rpcUrl
    .split(",")
    .map((u) => u.trim())
    .filter((u) => u !== "")
    .every((u) => {
      try {
        const host = new URL(u).hostname.replace(/^\[|\]$/g, "");
        return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
      } catch {
        return false;
      }
    });
}

/**
 * Anvil's well-known keys (and a generated administrator token) are for the local development chain only: anyone
 * holds those keys, so on a real network they would pay whoever asks first (issue 11, item 8). Allowed only when
 * RPC_URL is unset (npm start's own chain) or every endpoint is loopback and the chain id is 31337. The message is
 * one line naming the variable; undefined when nothing is refused. `chainId` is the configured or the RPC's id
 * (unknown: only the address is judged; start-up asks the RPC and calls again).
 */
export function developmentSecretsRefusal(
  config: Pick<Config, "rpcUrls" | "relayerPrivateKeys" | "deployerPrivateKey" | "adminToken">,
  chainId: number | undefined,
  options: { generatedAdminToken?: boolean } = {},
): string | undefined {
  // Every endpoint is judged (RPC_URL may list several).
  const rpcUrl = config.rpcUrls.join(",");
  if (!rpcUrl) return undefined;
  const local = isLoopbackRpcUrl(rpcUrl) && (chainId === undefined || chainId === LOCAL_CHAIN_ID);
  if (local) return undefined;
  const where = isLoopbackRpcUrl(rpcUrl) ? `the chain id is ${chainId}, not ${LOCAL_CHAIN_ID}` : "RPC_URL is not a loopback address";
  const wellKnown = new Set<string>(LOCAL_DEV_KEYS);
  if (config.relayerPrivateKeys.some((k) => wellKnown.has(k))) {
    return `Invalid configuration: RELAYER_PRIVATE_KEYS holds a well-known anvil development key, refused because ${where}`;
  }
  if (config.deployerPrivateKey && wellKnown.has(config.deployerPrivateKey)) {
    return `Invalid configuration: DEPLOYER_PRIVATE_KEY is a well-known anvil development key, refused because ${where}`;
  }
  if (options.generatedAdminToken) {
    return `Invalid configuration: ADMIN_TOKEN must be set (a generated token is for local development only) because ${where}`;
  }
  return undefined;
}
