import type { Address } from "viem";
import { getPublicClient } from "@/lib/chain/clients";
import { resolveDeployment } from "@/lib/chain/deployment";
import { readChainHealth } from "@/lib/health";
import { appConfig, appDb } from "@/lib/http/app-context";
import { createLogger } from "@/lib/log";
import { loadDashboardOverview, type DashboardOverview, type OverviewChain, type OverviewRange } from "./overview";

const logger = createLogger({ component: "dashboard" });

/** The overview of the running service: its database, its chain (RPC_URL) and its deployment. */
export async function loadServiceOverview(range: OverviewRange): Promise<DashboardOverview> {
  const config = appConfig();
  let chain: OverviewChain | null = null;
  if (config.rpcUrl) {
    let treasuryAddress: Address | null = null;
    try {
      treasuryAddress = resolveDeployment(config)?.treasuryAddress ?? null;
    } catch (error) {
      logger.warn("dashboard could not resolve the deployment", { error });
    }
    chain = { client: getPublicClient(), treasuryAddress };
  }
  const [overview, chainHealth] = await Promise.all([
    loadDashboardOverview(appDb(), {
      range,
      chain,
      // A worker beats at least once per interval; three missed beats (or 15 s) mean it is stuck or gone.
      heartbeatStaleMs: Math.max(3 * config.workerIntervalMs, 15_000),
    }),
    // The same reads as /health (shared, cached 2 s): each RPC endpoint's state and the fee ceiling.
    config.rpcUrls.length > 0 ? readChainHealth(config).catch(() => undefined) : Promise.resolve(undefined),
  ]);
  if (!chainHealth) return overview;
  // Administrators see each endpoint's origin (never its path or query: a provider key often sits there).
  const rpcEndpoints = (chainHealth.chain.endpoints ?? []).map((e) => ({ ...e, endpoint: new URL(config.rpcUrls[e.index - 1]!).origin }));
  return { ...overview, rpcEndpoints, fees: chainHealth.fees };
}
