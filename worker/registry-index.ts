import { readRegistryCursor, recordRegistryRange } from "@/db/queries/registry-mirror";
import { LogsRefusedError } from "./chain-answers";
import type { WorkerContext } from "./context";

/**
 * Keeps the registry's mirror (decisions.md, "No chain call for a request the database refuses"): the registry's
 * `WalletSponsored` events, read with `eth_getLogs` in windows of WorkerChain.logWindow blocks (LOG_QUERY_BLOCKS, or
 * fewer once the provider refused that many) from its deployment block (or
 * REGISTRY_INDEX_LOOKBACK blocks back when the deployment does not say) up to the newest block CONFIRMATIONS deep, are copied into
 * registry_sponsored_wallets, so creation answers "already sponsored" for a wallet marked on-chain without asking
 * the chain. Review still asks the chain (`areSponsored`), so a mirror that lags (the first catch-up, a node that
 * is down) never lets a wallet be paid twice: it only lets a request reach review before it is rejected.
 *
 * The cursor never passes a block the answering endpoint did not know. `head` is the highest of the survey's
 * endpoints, but the logs may come from another endpoint, or another node of a provider's pool, a few blocks behind
 * it, which answers a range past its own head with the logs it has and no error (anvil, older geth). So each window
 * is read with that endpoint's own head (WorkerChain.walletsSponsored) and recorded only up to it: a window covered
 * in part ends the pass there, one no endpoint reaches yet leaves the cursor where it is. Before, the cursor moved
 * past such blocks and the wallets they marked were missing from the mirror for good (worker/registry-index.test.ts).
 *
 * Runs with the worker's maintenance, at most every REGISTRY_INDEX_INTERVAL_MS, and reads at most
 * MAX_WINDOWS_PER_PASS windows a pass (a long catch-up is spread over passes). Idempotent: several workers may
 * index the same range.
 */
export const REGISTRY_INDEX_INTERVAL_MS = 10_000;
const MAX_WINDOWS_PER_PASS = 20;
/** How far back a mirror with no deployment block starts (about two weeks of 12-s blocks). */
export const REGISTRY_INDEX_LOOKBACK = 100_000n;
/** While the provider refuses eth_getLogs, how often that is logged (each pass tries again, quietly). */
const REFUSED_LOG_EVERY_MS = 10 * 60_000;
const lastRefusalLog = new WeakMap<WorkerContext, number>();

export async function indexRegistry(ctx: WorkerContext, head: bigint): Promise<{ wallets: number; nextBlock: bigint }> {
  const registry = ctx.chain.registryAddress;
  const safeHead = head - BigInt(ctx.settings.confirmations - 1);
  // Without a deployment block (REGISTRY_ADDRESS from the environment) the mirror starts REGISTRY_INDEX_LOOKBACK
  // blocks back rather than at block 0, which on a public chain would be hours of eth_getLogs on the provider's
  // quota; wallets sponsored before that are refused by review (areSponsored), never paid twice.
  let next =
    (await readRegistryCursor(ctx.db, registry)) ??
    ctx.chain.registryFromBlock ??
    (safeHead > REGISTRY_INDEX_LOOKBACK ? safeHead - REGISTRY_INDEX_LOOKBACK : 0n);
  let wallets = 0;
  for (let read = 0; read < MAX_WINDOWS_PER_PASS && next <= safeHead; read++) {
    const window = ctx.chain.logWindow;
    const to = next + window - 1n < safeHead ? next + window - 1n : safeHead;
    let found: Awaited<ReturnType<typeof ctx.chain.walletsSponsored>>;
    try {
      found = await ctx.chain.walletsSponsored(next, to);
    } catch (error) {
      // A provider that does not serve eth_getLogs (or refuses even a few blocks): the mirror waits where it is, and
      // review still asks the registry itself. Not a failure of the pass: logged every 10 minutes, not every 10 s
      // as a stage error (which also reopened the worker's LISTEN connection as a "recovery" at each next pass).
      if (!(error instanceof LogsRefusedError)) throw error;
      const now = performance.now();
      if (now - (lastRefusalLog.get(ctx) ?? Number.NEGATIVE_INFINITY) >= REFUSED_LOG_EVERY_MS) {
        lastRefusalLog.set(ctx, now);
        ctx.log.warn("registry mirror waiting: the RPC refuses eth_getLogs", { fromBlock: Number(next), error: error.message });
      }
      break;
    }
    // No endpoint knows `next` yet (the head surveyed was another endpoint's, or another node's of a pool): the
    // cursor stays, and a later pass reads the range.
    if (found === undefined) break;
    await recordRegistryRange(ctx.db, registry, found.wallets, found.through + 1n);
    wallets += found.wallets.length;
    next = found.through + 1n;
    // Covered only up to the head of the endpoint that got furthest, or a narrowed window: the rest waits for a later pass.
    if (found.through < to) break;
  }
  return { wallets, nextBlock: next };
}
