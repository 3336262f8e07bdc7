import type { Database } from "@/db/client";
import { readBudgetExhaustion, readServiceState } from "@/db/queries/controls";
import type { Config } from "@/lib/config";
import { retryAfterSeconds } from "./rate-limits";

/**
 * The administrator's gates on sponsorships that GET /faucet reports before any chain state (decisions.md, "On
 * the open internet"): the pause, and the global budget SPONSOR_BUDGET_PER_HOUR / SPONSOR_BUDGET_PER_DAY. They are
 * read from the same rows `POST /sponsorship/request` decides on (db/functions/), so the status and the refusal
 * cannot disagree: `paused` with `retryAfterSeconds: 60` (the 503's Retry-After), `budget_exhausted` with the
 * seconds until the rolling window has room (the 429's Retry-After). It runs at most once a second (GET /faucet
 * serves a snapshot), never per request.
 */
export type FaucetGate = { state: "paused" | "budget_exhausted"; retryAfterSeconds: number };

export const PAUSED_RETRY_AFTER_SECONDS = 60;

export async function faucetGateState(deps: { db: Database; config: Config }): Promise<FaucetGate | null> {
  const [state, budget] = await Promise.all([
    readServiceState(deps.db),
    readBudgetExhaustion(deps.db, { perHour: deps.config.sponsorBudgetPerHour, perDay: deps.config.sponsorBudgetPerDay }),
  ]);
  if (state.paused) return { state: "paused", retryAfterSeconds: PAUSED_RETRY_AFTER_SECONDS };
  // The wait as the database counts it (it read the window): a step or skew of this server's clock does not move it.
  if (budget) return { state: "budget_exhausted", retryAfterSeconds: retryAfterSeconds(budget.retryInMs) };
  return null;
}
