import { getConfig } from "@/lib/config";
import { resolveDeployment } from "@/lib/chain/deployment";

/** What the pages may tell a browser about the deployment: never the RPC address, never a key. */
export type PublicSettings = {
  /** Block explorer base URL (EXPLORER_URL), or null: links are `${explorerUrl}/tx/${hash}`. */
  explorerUrl: string | null;
  chainId: number;
};

const ANVIL_CHAIN_ID = 31337;

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
  return { explorerUrl: config.explorerUrl?.replace(/\/+$/, "") ?? null, chainId: chainId ?? ANVIL_CHAIN_ID };
}
