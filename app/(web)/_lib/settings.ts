import { getConfig, isLoopbackRpcUrl, type Config } from "@/lib/config";
import { resolveDeployment } from "@/lib/chain/deployment";

/** What the pages may tell a browser about the deployment: never RPC_URL (it may carry a provider key), never a key. */
export type PublicSettings = {
  /** Block explorer base URL (EXPLORER_URL), or null: links are `${explorerUrl}/tx/${hash}`. */
  explorerUrl: string | null;
  chainId: number;
  /** The JSON-RPC URL a user's browser wallet may be given (walletRpcUrl), or null: no "Add network" button. */
  walletRpcUrl: string | null;
};

const ANVIL_CHAIN_ID = 31337;

/**
 * The RPC URL offered to browser wallets by "Add <network> to your wallet": PUBLIC_RPC_URL; when unset, the first
 * RPC_URL if every endpoint is loopback (npm start's local chain: a wallet in a browser on this machine reaches
 * it, and a loopback URL carries no provider key); otherwise none. A remote RPC_URL is never shown to browsers.
 */
export function walletRpcUrl(config: Pick<Config, "publicRpcUrl" | "rpcUrls">): string | null {
  if (config.publicRpcUrl) return config.publicRpcUrl;
  const first = config.rpcUrls[0];
  return first !== undefined && isLoopbackRpcUrl(config.rpcUrls.join(",")) ? first : null;
}

export function getPublicSettings(): PublicSettings {
  const config = getConfig();
  let chainId = config.chainId;
  if (chainId === undefined) {
    try {
      chainId = resolveDeployment(config)?.chainId;
    } catch {
      chainId = undefined;
    }
  }
  return { explorerUrl: config.explorerUrl?.replace(/\/+$/, "") ?? null, chainId: chainId ?? ANVIL_CHAIN_ID, walletRpcUrl: walletRpcUrl(config) };
}
