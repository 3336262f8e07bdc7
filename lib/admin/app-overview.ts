import { getPublicClient } from "@/lib/chain/clients";
import { resolveDeployment } from "@/lib/chain/deployment";
import { appConfig, appDb } from "@/lib/http/app-context";
import { createLogger } from "@/lib/log";
import { loadDashboardOverview, type DashboardOverview, type OverviewChain, type OverviewRange } from "./overview";

const logger = createLogger({ component: "dashboard" });

/** The overview of the running service: its database, its chain (RPC_URL) and its deployment. */
export async function loadServiceOverview(range: OverviewRange): Promise<DashboardOverview> {
  const config = appConfig();
  let chain: OverviewChain | null = null;
  if (config.rpcUrl) {
    let treasuryAddress: `0x${string}` | null = null;
    try {
      treasuryAddress = resolveDeployment(config)?.treasuryAddress ?? null;
    } catch (error) {
      logger.warn("dashboard could not resolve the deployment", { error });
    }
    chain = { client: getPublicClient(), treasuryAddress };
  }
  return loadDashboardOverview(appDb(), {
    range,
    chain,
    // A worker beats at least once per interval; three missed beats (or 15 s) mean it is stuck or gone.
    heartbeatStaleMs: Math.max(3 * config.workerIntervalMs, 15_000),
  });
}
