import { parseAbi } from "viem";
import { createChainClients } from "@/lib/chain/clients";
import { resolveDeployment } from "@/lib/chain/deployment";
import { createNodeFetch } from "@/lib/chain/node-fetch";
import type { Config } from "@/lib/config";
import { log } from "@/lib/log";
import type { Address } from "./address";

/**
 * The on-chain half of "already sponsored" at creation (decisions.md, POST /sponsorship/request): the registry's
 * `isSponsored(address)`. Only that one view function is used (a minimal ABI), so any contract exposing it works.
 * If the chain cannot be reached the request is still accepted as pending; the pipeline's review checks again.
 */

/** Answers whether the registry has marked the wallet as sponsored; may throw when the chain cannot be reached. */
export type SponsoredReader = (wallet: Address) => Promise<boolean>;

export type OnChainSponsorship = "sponsored" | "not_sponsored" | "unknown";

export const isSponsoredAbi = parseAbi(["function isSponsored(address wallet) view returns (bool)"]);

/** How long creation waits for the chain before accepting the request anyway. */
export const ELIGIBILITY_TIMEOUT_MS = 1_500;
/**
 * Concurrent creations' reads travel together: each waits this long for others to share one JSON-RPC batch (one
 * HTTP request to the node instead of one each; docs/performance.md).
 */
export const ELIGIBILITY_BATCH_WAIT_MS = 3;
/** After a failure, creation does not ask the chain again for this long (no pile-up behind a dead RPC). */
export const ELIGIBILITY_BACKOFF_MS = 5_000;

export function registrySponsoredReader(options: { rpcUrl: string; registryAddress: Address; timeoutMs?: number }): SponsoredReader {
  const client = createChainClients({
    rpcUrl: options.rpcUrl,
    timeoutMs: options.timeoutMs ?? ELIGIBILITY_TIMEOUT_MS,
    retryCount: 0,
    batchWaitMs: ELIGIBILITY_BATCH_WAIT_MS,
    // node:http with keep-alive: a fraction of the built-in fetch's CPU per call (lib/chain/node-fetch.ts).
    fetchFn: createNodeFetch(),
    maxResponseBodySize: false,
  });
  return (wallet) =>
    client.readContract({ address: options.registryAddress, abi: isSponsoredAbi, functionName: "isSponsored", args: [wallet] });
}

let cached: { key: string; reader: SponsoredReader | undefined } | undefined;

/** The reader for the configured chain and registry, or undefined when no chain is configured. */
export function configuredSponsoredReader(config: Config): SponsoredReader | undefined {
  const key = `${config.rpcUrl ?? ""}|${config.registryAddress ?? ""}|${config.treasuryAddress ?? ""}|${config.dataDir}`;
  if (cached?.key === key) return cached.reader;
  let reader: SponsoredReader | undefined;
  if (config.rpcUrl) {
    try {
      const deployment = resolveDeployment(config);
      if (deployment) reader = registrySponsoredReader({ rpcUrl: config.rpcUrl, registryAddress: deployment.registryAddress });
    } catch (error) {
      log.warn("no registry for the eligibility check", { error });
    }
  }
  cached = { key, reader };
  return reader;
}

const backoffUntil = new WeakMap<SponsoredReader, number>();

/**
 * Asks the chain, never throws: "unknown" when no reader is configured, the chain did not answer within
 * `timeoutMs`, or it failed recently (then the chain is not asked again for ELIGIBILITY_BACKOFF_MS).
 */
export async function checkSponsoredOnChain(
  reader: SponsoredReader | undefined,
  wallet: Address,
  timeoutMs = ELIGIBILITY_TIMEOUT_MS,
): Promise<OnChainSponsorship> {
  if (!reader) return "unknown";
  if ((backoffUntil.get(reader) ?? 0) > Date.now()) return "unknown";
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`isSponsored did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    const sponsored = await Promise.race([reader(wallet), timeout]);
    return sponsored ? "sponsored" : "not_sponsored";
  } catch (error) {
    backoffUntil.set(reader, Date.now() + ELIGIBILITY_BACKOFF_MS);
    log.warn("eligibility check could not reach the chain; accepting the request as pending", { wallet, error });
    return "unknown";
  } finally {
    clearTimeout(timer);
  }
}
