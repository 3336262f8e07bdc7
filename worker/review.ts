import { applyReviewDecisionsStatement, claimPendingRequestsStatement, type ReviewDecision } from "@/db/queries/pipeline";
import { pipelinedTransaction, sendQueries } from "@/db/queries/pipelined";
import { now } from "@/lib/sponsorship/clock";
import { ChainUnavailableError } from "./chain";
import type { WorkerContext } from "./context";
import { metrics } from "./metrics";

/**
 * Review (decisions.md "Pipeline"): claim due pending requests in a batch (FOR UPDATE SKIP LOCKED, so workers
 * never review the same request), re-check eligibility and move each to approved or rejected:
 * - an active block of the wallet (administrator, or automatic and not expired) -> rejected `wallet_blocked`;
 * - `isSponsored` true on-chain (one batched `areSponsored` call) -> rejected `already_sponsored`;
 * - otherwise approved `eligible`.
 * When the chain cannot be read, blocked wallets are still rejected and the rest stay pending (the rows are
 * untouched and unlocked at commit); the ChainUnavailableError reaches the loop, which backs off.
 * Two round trips to the database: BEGIN with the claim, then the decisions with COMMIT.
 */
export async function reviewPendingBatch(ctx: WorkerContext): Promise<{ claimed: number }> {
  let chainError: ChainUnavailableError | undefined;
  const claimed = await pipelinedTransaction(ctx.db, async (tx) => {
    const [claims] = await sendQueries(tx, [claimPendingRequestsStatement(ctx.settings.batchSize, now())]);
    if (claims.length === 0) return 0;

    const decisions: ReviewDecision[] = claims
      .filter((c) => c.blocked)
      .map((c) => ({ id: c.id, status: "rejected", reason: "wallet_blocked" }));
    const toCheck = claims.filter((c) => !c.blocked);
    if (toCheck.length > 0) {
      try {
        const sponsored = await ctx.chain.areSponsored(toCheck.map((c) => c.walletAddress));
        for (const c of toCheck) {
          const already = sponsored.get(c.walletAddress);
          if (already === undefined) throw new Error(`areSponsored gave no answer for ${c.walletAddress}`);
          decisions.push(already ? { id: c.id, status: "rejected", reason: "already_sponsored" } : { id: c.id, status: "approved", reason: "eligible" });
        }
      } catch (error) {
        if (!(error instanceof ChainUnavailableError)) throw error;
        chainError = error;
      }
    }
    const [moved] = decisions.length > 0 ? await sendQueries(tx, [applyReviewDecisionsStatement(decisions, ctx.actor)], { commit: true }) : [[]];
    const approved = decisions.filter((d) => d.status === "approved").length;
    metrics.finished(moved.filter((r) => r.status === "rejected"));
    ctx.status.totals.reviewed += moved.length;
    ctx.status.totals.approved += approved;
    ctx.status.totals.rejected += decisions.length - approved;
    if (decisions.length > 0) {
      ctx.log.debug("reviewed", { approved, rejected: decisions.length - approved, left: claims.length - decisions.length });
      for (const d of decisions) if (d.status === "rejected") ctx.log.info("request rejected", { requestId: d.id, reason: d.reason });
    }
    return claims.length;
  });
  if (chainError) throw chainError;
  return { claimed };
}
