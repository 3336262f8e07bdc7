import { resolveDeployment } from "@/lib/chain/deployment";
import type { Config } from "@/lib/config";
import { log } from "@/lib/log";

/**
 * The on-chain half of "already sponsored" at creation (decisions.md, POST /sponsorship/request, and "No chain call
 * for a request the database refuses"). Creation makes no chain call at all: the registry's `WalletSponsored`
 * events are mirrored into the database by the worker (worker/registry-index.ts), and create_sponsorship_request
 * reads that mirror for the configured registry. Review asks the registry itself (`areSponsored`), so a wallet the
 * mirror does not know yet is rejected there, before anything is sent.
 */

let cached: { key: string; registry: string | undefined } | undefined;

/** The registry whose mirror creation reads (lowercase), or undefined when no deployment is configured. */
export function configuredRegistryAddress(config: Config): string | undefined {
  const key = `${config.rpcUrl ?? ""}|${config.registryAddress ?? ""}|${config.treasuryAddress ?? ""}|${config.dataDir}`;
  if (cached?.key === key) return cached.registry;
  let registry: string | undefined;
  try {
    registry = resolveDeployment(config)?.registryAddress.toLowerCase();
  } catch (error) {
    log.warn("no registry for the eligibility check", { error });
  }
  cached = { key, registry };
  return registry;
}
