import type { Fees, MarketFees } from "./chain-answers";
import { metrics } from "./metrics";

/**
 * The fee ceiling (decisions.md "Operators are told", `MAX_FEE_PER_GAS_GWEI`): no transaction is ever signed with a
 * `maxFeePerGas` above it. The fees offered are the market's, capped at the ceiling; while the base fee itself is
 * above the ceiling no transaction signed under it could be mined, so nothing new is signed at all: new relays wait
 * (requests stay approved, no attempt is used), stuck ones are not replaced, holes are not filled. When the base
 * fee falls to the ceiling or below, everything moves again by itself.
 */

/** The market's fees capped at the ceiling, and whether the network currently asks more than the ceiling. */
export type OfferedFees = Fees & {
  /** True while the latest block's base fee is above the ceiling: sign nothing. */
  aboveCeiling: boolean;
  baseFeePerGas: bigint;
};

export function capFees(market: MarketFees, ceilingWei: bigint | undefined): OfferedFees {
  const { baseFeePerGas } = market;
  if (ceilingWei === undefined)
    return { maxFeePerGas: market.maxFeePerGas, maxPriorityFeePerGas: market.maxPriorityFeePerGas, baseFeePerGas, aboveCeiling: false };
  const maxFeePerGas = market.maxFeePerGas < ceilingWei ? market.maxFeePerGas : ceilingWei;
  const maxPriorityFeePerGas = market.maxPriorityFeePerGas < maxFeePerGas ? market.maxPriorityFeePerGas : maxFeePerGas;
  return { maxFeePerGas, maxPriorityFeePerGas, baseFeePerGas, aboveCeiling: baseFeePerGas > ceilingWei };
}

/** True when `fees` may be signed under the ceiling. */
export function withinCeiling(fees: Fees, ceilingWei: bigint | undefined): boolean {
  return ceilingWei === undefined || fees.maxFeePerGas <= ceilingWei;
}

/**
 * What the worker knows of the ceiling, shown in its heartbeat (`fees`), by /health and in metrics. `since` is when
 * the current episode above the ceiling began: the hook for the `fees.above_ceiling` alert (sent once when it
 * starts, again only after it ended), see `FeeCeilingWatch.onChange`.
 */
export type FeeCeilingState = {
  ceilingWei: bigint;
  baseFeeWei: bigint | undefined;
  aboveCeiling: boolean;
  since: Date | undefined;
  checkedAt: Date | undefined;
  /** performance.now() of the last check (how old it is, whatever the wall clock does). */
  checkedAtMs: number | undefined;
};

export type FeeCeilingChange = { aboveCeiling: boolean; baseFeeWei: bigint; ceilingWei: bigint; since: Date | undefined; lastedMs?: number };

/** Tracks whether the network's fees are above the ceiling, and reports each start and end of an episode once. */
export class FeeCeilingWatch {
  readonly state: FeeCeilingState;
  /** Called on every change of `aboveCeiling` (start and end of an episode): logs, metrics, later the alert. */
  onChange: ((change: FeeCeilingChange) => void) | undefined;
  /** When the episode started, on the monotonic clock (its length must not follow a step of the wall clock). */
  private startedAt: number | undefined;

  constructor(ceilingWei: bigint) {
    this.state = { ceilingWei, baseFeeWei: undefined, aboveCeiling: false, since: undefined, checkedAt: undefined, checkedAtMs: undefined };
  }

  /** Records fees just read from the chain. */
  note(offered: OfferedFees): void {
    const s = this.state;
    const now = new Date();
    s.baseFeeWei = offered.baseFeePerGas;
    s.checkedAt = now;
    s.checkedAtMs = performance.now();
    metrics.feeCeiling({ ceilingWei: s.ceilingWei, baseFeeWei: offered.baseFeePerGas, aboveCeiling: offered.aboveCeiling });
    if (offered.aboveCeiling === s.aboveCeiling) return;
    const lastedMs = this.startedAt === undefined ? undefined : Math.round(performance.now() - this.startedAt);
    s.aboveCeiling = offered.aboveCeiling;
    s.since = offered.aboveCeiling ? now : undefined;
    this.startedAt = offered.aboveCeiling ? performance.now() : undefined;
    this.onChange?.({
      aboveCeiling: s.aboveCeiling,
      baseFeeWei: offered.baseFeePerGas,
      ceilingWei: s.ceilingWei,
      since: s.since,
      ...(lastedMs === undefined ? {} : { lastedMs }),
    });
  }
}

/** The condition of the `fees.above_ceiling` alert for one worker: true while its network asks more than the ceiling. */
export function feesAboveCeiling(state: FeeCeilingState | undefined): boolean {
  return state?.aboveCeiling === true;
}
