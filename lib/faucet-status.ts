import * as chains from "viem/chains";
import type { Database } from "@/db/client";
import { readMedianSecondsToComplete } from "@/db/queries/faucet";
import type { Config } from "@/lib/config";
import { chainChecks, knownChainId } from "@/lib/health";
import { HttpProblem } from "@/lib/http/problem";
import { isLoopbackRpcUrl } from "@/lib/local-chain";
import { faucetGateState } from "@/lib/sponsorship/faucet-gate";
import type { FaucetState, FaucetStatusResponse } from "@/lib/sponsorship/schemas";

/**
 * GET /faucet (decisions.md, "Public faucet status"): what the faucet gives, on which network, whether it is
 * serving and how long a sponsorship usually takes. Public and polled by every open /request page, so it is served
 * from an in-process snapshot taken at most once every FAUCET_SNAPSHOT_MS and shared by concurrent callers: at
 * most one database query a second per process, never one per request. The chain part is /health's own cached
 * reads (lib/health.ts), not a second set.
 *
 * State, first match wins: the administrator's gates (faucetGateState: paused, budget_exhausted); the chain (no
 * endpoint answers) or the treasury cannot be read, or there is no treasury: chain_unreachable; the treasury paused on-chain: paused;
 * less than one sponsorship in it: empty; fewer than TREASURY_LOW_SPONSORSHIPS: low_funds (still serving);
 * else operating.
 */

export const FAUCET_SNAPSHOT_MS = 1_000;
/** While the faucet cannot serve for a reason no clock ends (empty, unreachable, paused on-chain), or serves on low funds: look again in a minute. */
export const FAUCET_RETRY_SECONDS = 60;

/** While the network is not known yet (no endpoint has answered, CHAIN_ID unset): the chain checks' own pace. */
const FAUCET_UNKNOWN_CHAIN_RETRY_SECONDS = 5;

const LOCAL_CHAIN_ID = 31337;
const knownChains = Object.values(chains as Record<string, { id: number; name: string; nativeCurrency: { symbol: string } }>);

function describeNetwork(config: Config, chainId: number): { networkName: string; nativeSymbol: string } {
  const known = knownChains.find((c) => c.id === chainId);
  const nativeSymbol = known?.nativeCurrency.symbol ?? "ETH";
  if (config.networkName) return { networkName: config.networkName, nativeSymbol };
  if (chainId === LOCAL_CHAIN_ID) return { networkName: "Local development chain", nativeSymbol };
  return { networkName: known?.name ?? `Chain ${chainId}`, nativeSymbol };
}

type Deps = { db: Database; config: Config };

async function readFaucetStatus({ db, config }: Deps): Promise<FaucetStatusResponse> {
  const [gate, { chain, treasury }, medianSecondsToComplete] = await Promise.all([
    faucetGateState({ db, config }),
    chainChecks(config),
    readMedianSecondsToComplete(db),
  ]);
  // The chain was reached when some endpoint answered its id: `ok`, or `degraded` while only some of several
  // RPC endpoints answer (the others serve, decisions.md "Several RPC endpoints"). While none does: what is known
  // without it (an outage does not change a chain's id); the local chain's only when nothing ever told it and
  // every endpoint is loopback (npm start's chain). A remote chain whose id nothing has told yet (CHAIN_ID unset,
  // no endpoint answered since this process started) is not named at all: 503, as for any part not reached yet.
  const chainId = chain.chainId ?? knownChainId(config) ?? (isLoopbackRpcUrl(config.rpcUrls.join(",")) ? LOCAL_CHAIN_ID : undefined);
  if (chainId === undefined) {
    throw new HttpProblem("unavailable", "No RPC endpoint has answered yet, so the faucet's network is not known; retry shortly", {
      headers: { "retry-after": String(FAUCET_UNKNOWN_CHAIN_RETRY_SECONDS) },
    });
  }

  let state: FaucetState;
  let retryAfterSeconds: number | null = FAUCET_RETRY_SECONDS;
  const balance = treasury.balanceWei === undefined ? undefined : BigInt(treasury.balanceWei);
  // What one sponsorship pays: the treasury's own amount when it was read (SPONSOR_AMOUNT_WEI unless the owner
  // changed it on-chain since the deployment), as /health's treasury check and the worker judge it.
  const amount = treasury.requiredWei === undefined ? config.sponsorAmountWei : BigInt(treasury.requiredWei);
  if (gate) ({ state, retryAfterSeconds } = gate);
  else if (chain.chainId === undefined || balance === undefined) state = "chain_unreachable";
  else if (treasury.paused) state = "paused";
  else if (balance < amount) state = "empty";
  // low_funds still serves, but is not `operating`: decisions.md gives every other state a time to look again.
  else if (balance < amount * BigInt(config.treasuryLowSponsorships)) state = "low_funds";
  else {
    state = "operating";
    retryAfterSeconds = null;
  }

  return {
    chainId,
    ...describeNetwork(config, chainId),
    amountWei: amount.toString(),
    explorerUrl: config.explorerUrl ?? null,
    state,
    retryAfterSeconds,
    medianSecondsToComplete,
  };
}

let snapshot: { deps: Deps; takenAtClock: number; value: Promise<FaucetStatusResponse> } | undefined;

/**
 * The faucet's status as of at most FAUCET_SNAPSHOT_MS before now. The snapshot's age is measured on `clockMs`, a
 * monotonic clock (a step back of the wall clock, NTP or a restored VM, would otherwise keep one snapshot for the
 * length of the step); what it reads is dated by the database's clock (the budget's wait, the last hour's median).
 */
export function faucetStatus(deps: Deps, clockMs = performance.now()): Promise<FaucetStatusResponse> {
  const age = snapshot ? clockMs - snapshot.takenAtClock : Number.NaN;
  const fresh = snapshot && snapshot.deps.db === deps.db && snapshot.deps.config === deps.config && age >= 0 && age < FAUCET_SNAPSHOT_MS;
  if (!fresh) {
    const taken = { deps, takenAtClock: clockMs, value: readFaucetStatus(deps) };
    snapshot = taken;
    // A failed read is answered once (a problem) and not served again from the snapshot.
    taken.value.catch(() => {
      if (snapshot === taken) snapshot = undefined;
    });
  }
  return snapshot!.value;
}
