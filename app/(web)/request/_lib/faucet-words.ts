import { formatUnits } from "viem";
import type { FaucetStatusView } from "./api";

/** GET /faucet in plain words for /request (the states of decisions.md, "Public faucet status"). */

export type FaucetWords = {
  /** Whether the form may be used: the faucet serves requests (operating, or low on funds). */
  serving: boolean;
  label: string;
  sentence: string;
};

const WORDS: Record<FaucetStatusView["state"], Omit<FaucetWords, "serving">> = {
  operating: { label: "Operating", sentence: "The faucet is sending tokens." },
  low_funds: { label: "Low on funds", sentence: "The faucet is sending tokens, but it will need refilling soon." },
  paused: { label: "Paused", sentence: "The faucet is paused by its operator; requests are not accepted for now." },
  budget_exhausted: { label: "Out of budget", sentence: "The faucet has given away its budget for now; requests are accepted again when it has room." },
  empty: { label: "Empty", sentence: "The faucet has run out of tokens; requests are accepted again once it is refilled." },
  chain_unreachable: {
    label: "Network unreachable",
    sentence: "The faucet cannot reach the network right now, so it cannot send tokens; try again in a minute.",
  },
};

export function describeFaucet(status: Pick<FaucetStatusView, "state">): FaucetWords {
  return { serving: status.state === "operating" || status.state === "low_funds", ...WORDS[status.state] };
}

/** "0.01 ETH": the amount in whole tokens (18 decimals, as every EVM native token), without trailing zeros. */
export function formatAmount(amountWei: string, symbol: string): string {
  return `${formatUnits(BigInt(amountWei), 18)} ${symbol}`;
}

/**
 * "about 12 seconds" / "about 3 minutes" / "about 1.5 hours", or null without data. Hours to the half hour: 90 minutes
 * is where minutes end, and a whole hour then read 5,400 s as "about 2 hours".
 */
export function formatUsualTime(seconds: number | null): string | null {
  if (seconds === null) return null;
  if (seconds < 90) {
    const n = Math.max(1, Math.round(seconds));
    return `about ${n} second${n === 1 ? "" : "s"}`;
  }
  if (seconds < 90 * 60) return `about ${Math.round(seconds / 60)} minutes`;
  return `about ${Math.round(seconds / 1800) / 2} hours`;
}
