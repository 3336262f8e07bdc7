import type { Database } from "@/db/client";
import type { Config } from "@/lib/config";

/**
 * The administrator's gates on sponsorships that GET /faucet reports before any chain state (decisions.md, "On
 * the open internet": the pause, and the global budget SPONSOR_BUDGET_PER_HOUR / SPONSOR_BUDGET_PER_DAY).
 *
 * Not wired yet: the pause flag and the budget are tables being added with the abuse-control issue. Until then
 * this returns null (no gate). Wire it to the same reads `POST /sponsorship/request` uses, so the status and the
 * refusal cannot disagree: `paused` with `retryAfterSeconds: 60` (the 503's Retry-After), `budget_exhausted` with
 * the seconds until the rolling window has room (the 429's Retry-After). It runs at most once a second (GET /faucet
 * serves a snapshot), never per request.
 */
export type FaucetGate = { state: "paused" | "budget_exhausted"; retryAfterSeconds: number };

export async function faucetGateState(_deps: { db: Database; config: Config; nowMs: number }): Promise<FaucetGate | null> {
  return null;
}
