import { getConfig, isLoopbackRpcUrl, type Config } from "@/lib/config";
import { chainChecks, knownChainId } from "@/lib/health";

/** What the pages may tell a browser about the deployment: never RPC_URL (it may carry a provider key), never a key. */
export type PublicSettings = {
  /** Block explorer base URL (EXPLORER_URL), or null: links are `${explorerUrl}/tx/${hash}`. */
  explorerUrl: string | null;
  /** The chain's id, or null while none is known (CHAIN_ID unset and the RPC not answering). */
  chainId: number | null;
  /** The JSON-RPC URL a user's browser wallet may be given (walletRpcUrl), or null: no "Add network" button. */
  walletRpcUrl: string | null;
};

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

/**
 * The chain's id: what is known without asking the chain (lib/health.ts knownChainId), else the RPC's own answer
 * (read by /health's chain check, cached and shared). Never a guess: with CHAIN_ID unset (its default: read from the
 * RPC) "Add network" would otherwise ask a wallet on the real network to switch to another chain.
 */
async function chainIdOf(config: Config): Promise<number | null> {
  const known = knownChainId(config);
  if (known !== undefined || config.rpcUrls.length === 0) return known ?? null;
  try {
    return (await chainChecks(config)).chain.chainId ?? null;
  } catch {
    return null;
  }
}

/** The block explorer's base URL (EXPLORER_URL) alone: no chain read for a page that needs only it. */
export function publicExplorerUrl(config: Config = getConfig()): string | null {
  return config.explorerUrl ?? null;
}

export async function getPublicSettings(config: Config = getConfig()): Promise<PublicSettings> {
  const chainId = await chainIdOf(config);
  return {
    explorerUrl: publicExplorerUrl(config),
    chainId,
    // No chain known, nothing to add: the button would name a chain the wallet cannot check.
    walletRpcUrl: chainId === null ? null : walletRpcUrl(config),
  };
}
