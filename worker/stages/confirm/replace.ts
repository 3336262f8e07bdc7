import { insertNonceFill } from "@/db/queries/nonce-fills";
import { lockIfOpen, lockRequest } from "@/db/queries/relay-outcomes";
import { insertRelayAttempts, walletBlocksAtCommit } from "@/db/queries/relay-queue";
import { lockLeasedRelayers } from "@/db/queries/relayers";
import { pipelinedTransaction } from "@/db/sql/transaction";
import { currentFees, type WorkerContext } from "../../context";
import { withinCeiling } from "../../fee-ceiling";
import { metrics } from "../../metrics";
import { LeaseLostError } from "../../relayers";
import { signAttempt, signFill, storedAttempt, storedFill } from "../attempts";
import { broadcastStored, type StoredTransaction } from "../broadcast";
import { bumpFees } from "../transactions";
import { isOpen, type ConfirmState, type Group } from "./state";

/**
 * Replacing a group unmined for RELAY_TIMEOUT_MS: the request's next attempt at the same nonce with fees >= +12.5%
 * (./transactions.ts prices the bump), or, after the last attempt, when the request's wallet has been blocked by an
 * administrator since, or when the stuck one is itself a fill, a fill that cancels the nonce (the request can then
 * fail for good, or wait for the block to be lifted). A replaced transaction stays open until its nonce is
 * settled (it may still be the one mined: then it completes its request); a replacement refused for good fails
 * alone, and the newest open transaction is watched again (replaced a timeout later, outbidding everything stored at
 * the nonce). Signed and stored by ../attempts.ts, as the relay stage's first attempts are.
 */
export async function replace(ctx: WorkerContext, state: ConfirmState, group: Group): Promise<void> {
  // The transaction to replace: the newest open one (a refused replacement after it is closed and only raises the
  // bid: fees outbid every transaction stored at the nonce, open or not).
  const open = group.rows.filter(isOpen);
  const current = open[open.length - 1];
  if (!current) return;
  const market = await currentFees(ctx);
  // The fee ceiling: while the network asks more than it, a replacement could not be mined either; and one that
  // must outbid the stuck transaction above the ceiling is never signed. The transaction stays open and watched
  // (it is mined by itself once the base fee falls under its max fee, or replaced then).
  if (market.aboveCeiling) return;
  const highest = group.rows.reduce(
    (acc, r) => ({
      maxFeePerGas: r.maxFeePerGas > acc.maxFeePerGas ? r.maxFeePerGas : acc.maxFeePerGas,
      maxPriorityFeePerGas: r.maxPriorityFeePerGas > acc.maxPriorityFeePerGas ? r.maxPriorityFeePerGas : acc.maxPriorityFeePerGas,
    }),
    { maxFeePerGas: 0n, maxPriorityFeePerGas: 0n },
  );
  const fees = bumpFees(highest, market);
  const ceiling = ctx.feeCeiling?.state.ceilingWei;
  if (!withinCeiling(fees, ceiling)) {
    noteNotReplaced(ctx, state, group, fees.maxFeePerGas, ceiling!);
    return;
  }
  const timeout = ctx.settings.relayTimeoutMs;

  let walletBlocked = false;
  const stored = await pipelinedTransaction(ctx.db, async (tx): Promise<StoredTransaction | undefined> => {
    const [fence, stillOpen] = await tx.send([lockLeasedRelayers(ctx.workerId, [group.relayer]), lockIfOpen(current.kind, current.id)]);
    if (!fence.has(group.relayer)) throw new LeaseLostError(`lease of ${group.relayer} lost before replacing nonce ${group.nonce}`);
    // Settled meanwhile (another pass, a takeover): nothing to replace.
    if (!stillOpen) return undefined;

    if (current.kind === "relay") {
      const requestId = current.sponsorshipRequestId!;
      // The wallet's administrator block is read under its advisory key, held to the commit (as the relay stage
      // does): a wallet blocked since its attempt was sent is not paid by a replacement; the nonce is cancelled below,
      // and the request waits, relayed, until the block is lifted (the relay stage's next attempt) or fails as usual.
      const [status, { burned, latest }, , blocked] = await tx.send([
        ...lockRequest(requestId),
        ...walletBlocksAtCommit([{ requestId, walletAddress: current.walletAddress! }]),
      ]);
      // The request's latest attempt is at this nonce (a refused replacement counts: it used its number). Attempts
      // are numbered by `latest`, limited by `burned`: a service-caused revert used a number and burned none.
      const latestHere = Math.max(...group.rows.filter((r) => r.kind === "relay" && r.sponsorshipRequestId === requestId).map((r) => r.relayAttempt ?? 0));
      const replaceable = status === "relayed" && burned < ctx.settings.maxRelayAttempts && latest === latestHere;
      // The block named as the cause only where it is the one (the log and the fill's reason).
      walletBlocked = replaceable && blocked.length > 0;
      if (replaceable && !walletBlocked) {
        const attempt = await signAttempt(ctx, {
          requestId,
          attempt: latest + 1,
          wallet: current.walletAddress!,
          relayer: group.relayer,
          nonce: group.nonce,
          fees,
        });
        const [ids] = await tx.send([insertRelayAttempts([attempt])]);
        ctx.status.totals.replacements++;
        // "timeout": an attempt not mined in time was replaced (it stays open: it may still be the one mined).
        metrics.failure(group.relayer, "timeout");
        metrics.attempt(group.relayer, attempt.relayAttempt);
        ctx.log.warn("relay attempt stuck: replaced at the same nonce", {
          requestId,
          attempt: attempt.relayAttempt,
          relayer: group.relayer,
          nonce: group.nonce,
          replaced: current.transactionHash,
          hash: attempt.transactionHash,
          maxFeePerGas: fees.maxFeePerGas,
        });
        return storedAttempt(attempt, ids.get(attempt.transactionHash)!);
      }
    }

    // No attempt left, the wallet blocked, or the stuck one is itself a fill: cancel the nonce with a zero-value
    // transfer to self. What is open at the nonce stays open until one of them is mined (the others fail as
    // superseded or cancelled then).
    const previousFill = current.kind === "fill" ? current : undefined;
    const requestId = current.sponsorshipRequestId;
    const why = previousFill
      ? previousFill.relayAttempt === null && previousFill.sponsorshipRequestId === null
        ? `fill of nonce ${group.nonce}, fees raised`
        : `cancel of nonce ${group.nonce} for request ${requestId}, fees raised`
      : walletBlocked
        ? `cancel: attempt ${current.relayAttempt} of request ${requestId} not mined within ${timeout} ms and its wallet is blocked by an administrator`
        : `cancel: attempt ${current.relayAttempt} of request ${requestId} not mined within ${timeout} ms and no attempt left`;
    const fill = await signFill(ctx, { relayer: group.relayer, nonce: group.nonce, fees, requestId, reason: why });
    const [id] = await tx.send([insertNonceFill(fill)]);
    ctx.status.totals.fills++;
    ctx.log.warn("nonce cancelled by a fill", { relayer: group.relayer, nonce: group.nonce, requestId, hash: fill.transactionHash, why });
    return storedFill(fill, id);
  });
  if (stored) {
    await broadcastStored(ctx, [stored], "first");
    state.noteSent([stored.hash]);
  }
}

/** A stuck transaction whose replacement would have to be signed above the fee ceiling (logged every 30 s). */
function noteNotReplaced(ctx: WorkerContext, state: ConfirmState, group: Group, wouldBe: bigint, ceiling: bigint): void {
  const now = performance.now();
  if (now - state.lastNotReplacedLog < 30_000) return;
  state.lastNotReplacedLog = now;
  ctx.log.warn("stuck transaction not replaced: the replacement would exceed MAX_FEE_PER_GAS_GWEI", {
    relayer: group.relayer,
    nonce: group.nonce,
    replacementMaxFeePerGas: wouldBe,
    ceilingWei: ceiling,
  });
}
