import { recordFoundSponsored } from "@/db/queries/registry-mirror";
import { applyReviewDecisions, claimPendingRequests, type ReviewDecision } from "@/db/queries/review-queue";
import { pipelinedTransaction } from "@/db/sql/transaction";
import type { Address } from "viem";
import { CHAIN_WAIT_IN_TRANSACTION_MS, withinTransactionWait } from "../chain";
import { ChainUnavailableError } from "../chain-answers";
import type { WorkerContext } from "../context";
import { metrics } from "../metrics";
import { SPONSOR_GAS_LIMIT } from "./transactions";

/**
 * Reverts of `sponsor` caused by the service's own state, not by the wallet: a retry cures them once the operator
 * acts (unpauses, funds, authorises), so they never reject a request or burn an attempt (decisions.md, "Wallets
 * that cannot be paid"); the relay stage waits while the treasury is paused or short.
 */
export const SERVICE_STATE_REVERTS: ReadonlySet<string> = new Set(["NotRelayer", "TreasuryPaused", "InsufficientBalance"]);

/**
 * The treasury's reverts that say the wallet itself cannot be paid: `TransferFailed` (its `receive` reverted or ran
 * out of gas) and `ZeroAddress` (the zero address, which passes the address pattern and can never be paid). Only
 * they reject a request as `payment_refused`, and fail one whose attempt reverted so at once: any other revert, or
 * one whose reason the node did not return, approves as usual and is left to the relay stage's own checks, so a
 * misconfiguration or a provider that drops revert data can never reject every request for good.
 */
export const WALLET_REFUSED_REVERTS: ReadonlySet<string> = new Set(["TransferFailed", "ZeroAddress"]);

/** The relayer whose dry runs last told something (authorised by the treasury), per worker. */
const dryRunRelayers = new WeakMap<WorkerContext, Address>();

/**
 * The relayer to simulate from: one the relay stage last found authorised (its reads of the latest block it
 * relayed at), else the one that last simulated without NotRelayer, else the first leased or configured one.
 */
function dryRunRelayer(ctx: WorkerContext): Address | undefined {
  const candidates = [...ctx.pool.leased, ...ctx.pool.configured];
  const authorised = ctx.relayReads?.value.authorised;
  const known = authorised ? candidates.find((r) => authorised.has(r.toLowerCase() as Address)) : undefined;
  const last = dryRunRelayers.get(ctx);
  return known ?? (last && candidates.includes(last) ? last : candidates[0]);
}

/**
 * Review (decisions.md "Pipeline"): claim due pending requests in a batch (FOR UPDATE SKIP LOCKED, so workers
 * never review the same request), re-check eligibility and move each to approved or rejected:
 * - an active block of the wallet (administrator, or automatic and not expired) -> rejected `wallet_blocked`;
 * - `isSponsored` true on-chain (one batched `areSponsored` call) -> rejected `already_sponsored`;
 * - the payment itself simulated (`eth_call` of the treasury's `sponsor` from an authorised relayer, with the
 *   relay's gas limit, in the same JSON-RPC batch as `areSponsored` and the endpoint's `eth_chainId`; one that
 *   turns out not to be authorised is replaced by one that is, and those dry runs made again) reverts with TransferFailed (a contract whose `receive` refuses the
 *   transfer) -> rejected `payment_refused`, and nothing is ever sent for it; any other revert (the service's own
 *   state, SERVICE_STATE_REVERTS, or one without a reason) approves as usual, and the relay stage decides;
 * - otherwise approved `eligible`.
 * When the chain cannot be read, blocked wallets are still rejected and the rest stay pending (the rows are
 * untouched and unlocked at commit); the ChainUnavailableError reaches the loop, which backs off.
 * Two round trips to the database: BEGIN with the claim, then the decisions with COMMIT.
 */
export async function reviewPendingBatch(ctx: WorkerContext): Promise<{ claimed: number }> {
  let chainError: ChainUnavailableError | undefined;
  const claimed = await pipelinedTransaction(ctx.db, async (tx) => {
    const [claims] = await tx.send([claimPendingRequests(ctx.settings.batchSize)]);
    if (claims.length === 0) return 0;

    const decisions: ReviewDecision[] = claims.filter((c) => c.blocked).map((c) => ({ id: c.id, status: "rejected", reason: "wallet_blocked" }));
    const toCheck = claims.filter((c) => !c.blocked);
    if (toCheck.length > 0) {
      try {
        // Simulated from a relayer this worker may use and the treasury authorises (eth_call needs no key). Both reads
        // are issued together, so they travel in one JSON-RPC batch (one HTTP request), from one endpoint that answers
        // this chain's id in it (WorkerChain.reviewReads: one that moved to another network since the last maintenance
        // check is left aside, not believed); a wallet found already sponsored is rejected as such whatever its dry
        // run says. The claimed rows are locked meanwhile, the transaction idle: every chain call of the pass shares one bound (CHAIN_WAIT_IN_TRANSACTION_MS, worker/chain.ts;
        // a retry of the dry runs waits only for what the first calls left), past it the requests stay pending as in an
        // outage.
        const deadline = performance.now() + CHAIN_WAIT_IN_TRANSACTION_MS;
        const left = () => Math.max(1, deadline - performance.now());
        const relayer = dryRunRelayer(ctx);
        const wallets = toCheck.map((c) => ({ id: c.id, wallet: c.walletAddress as Address }));
        const { sponsored, reverts } = await withinTransactionWait(
          "review",
          ctx.chain.reviewReads(
            wallets.map((w) => w.wallet),
            relayer ? { relayer, requests: wallets, gas: SPONSOR_GAS_LIMIT } : undefined,
          ),
          left(),
        );
        // A relayer the treasury does not authorise (de-authorised since, or none known yet) reverts NotRelayer before
        // the payment is tried, which hides a wallet that refuses it: those are simulated again from one it does.
        const hidden = wallets.filter((w) => reverts.get(w.id)?.errorName === "NotRelayer");
        if (relayer && hidden.length > 0) {
          const pick = (authorised: Set<Address>) => ctx.pool.configured.find((r) => authorised.has(r));
          const read = ctx.chain.authorisedRelayers(ctx.pool.configured);
          // An answer past the bound still serves the next pass (which would otherwise ask again, and wait as long).
          read.then(
            (authorised) => {
              const found = pick(authorised);
              if (found) dryRunRelayers.set(ctx, found);
            },
            () => {},
          );
          const other = pick(await withinTransactionWait("review", read, left()));
          if (other) {
            for (const [id, revert] of await withinTransactionWait("review", ctx.chain.simulateSponsorships(other, hidden, SPONSOR_GAS_LIMIT), left()))
              reverts.set(id, revert);
          }
        }
        const payable: typeof toCheck = [];
        for (const c of toCheck) {
          const already = sponsored.get(c.walletAddress);
          if (already === undefined) throw new Error(`areSponsored gave no answer for ${c.walletAddress}`);
          if (already) decisions.push({ id: c.id, status: "rejected", reason: "already_sponsored" });
          else payable.push(c);
        }
        for (const c of payable) {
          const revert = reverts.get(c.id);
          if (revert?.errorName !== undefined && (WALLET_REFUSED_REVERTS.has(revert.errorName) || revert.errorName === "AlreadySponsored")) {
            const reason = revert.errorName === "AlreadySponsored" ? "already_sponsored" : "payment_refused";
            ctx.log.info("payment would revert: request rejected before anything is sent", { requestId: c.id, wallet: c.walletAddress, revert: revert.text });
            decisions.push({ id: c.id, status: "rejected", reason });
          } else decisions.push({ id: c.id, status: "approved", reason: "eligible" });
        }
      } catch (error) {
        if (!(error instanceof ChainUnavailableError)) throw error;
        chainError = error;
      }
    }
    // A wallet found sponsored on-chain goes into the registry's mirror too, so creation refuses it from now on.
    const wallets = new Map(claims.map((c) => [c.id, c.walletAddress]));
    const found = decisions.filter((d) => d.status === "rejected" && d.reason === "already_sponsored").map((d) => wallets.get(d.id)!);
    const mirror = found.length > 0 ? [recordFoundSponsored(ctx.chain.registryAddress, found, ctx.status.blockNumber ?? 0n)] : [];
    const [moved] = decisions.length > 0 ? await tx.send([applyReviewDecisions(decisions, ctx.actor), ...mirror], { commit: true }) : [[]];
    // What was written, not what was decided: an approval whose wallet was blocked meanwhile is written rejected.
    const rejected = new Set(moved.filter((r) => r.status === "rejected").map((r) => r.id));
    const approved = moved.length - rejected.size;
    metrics.finished(moved.filter((r) => r.status === "rejected"));
    ctx.status.totals.reviewed += moved.length;
    ctx.status.totals.approved += approved;
    ctx.status.totals.rejected += rejected.size;
    if (decisions.length > 0) {
      ctx.log.debug("reviewed", { approved, rejected: rejected.size, left: claims.length - decisions.length });
      for (const d of decisions) {
        if (rejected.has(d.id)) ctx.log.info("request rejected", { requestId: d.id, reason: d.status === "rejected" ? d.reason : "wallet_blocked" });
      }
    }
    return claims.length;
  });
  if (chainError) throw chainError;
  return { claimed };
}
