import type { Hash } from "viem";
import {
  completeRequests,
  completeRequestsOfConfirmed,
  confirmRelays,
  countOpenAttempts,
  failRelays,
  findRelayByHash,
  lockRequest,
  markRelaysMined,
} from "@/db/queries/relay-outcomes";
import type { MinedRelay, RelayFailure } from "@/db/queries/relay-outcomes";
import { confirmNonceFill, failNonceFills } from "@/db/queries/nonce-fills";
import type { OpenNonceTransaction } from "@/db/queries/nonce-groups";
import { failRequest, SERVICE_STATE_FAILURE } from "@/db/queries/relay-queue";
import { run } from "@/db/sql/run";
import { pipelinedTransaction, type PipelinedTransaction } from "@/db/sql/transaction";
import { LogsRefusedError, type MinedReceipt } from "../../chain-answers";
import type { WorkerContext } from "../../context";
import { metrics } from "../../metrics";
import { SERVICE_STATE_REVERTS, WALLET_REFUSED_REVERTS } from "../review";
import { isOpen, key, PartFailures, SUSPECT_CONFIRM_MS, type ConfirmState, type Group } from "./state";

/**
 * Settling (the confirm stage's status decisions): a nonce group whose nonce the chain consumed deep enough is
 * settled from the receipts of all its hashes (one batched request), which say which one won:
 * - a sponsor attempt mined with success: that attempt is confirmed (a replaced one too: it stays open until its
 *   nonce settles; failed -> confirmed when found by its Sponsored event), the others fail as superseded, the
 *   request is completed;
 * - mined and reverted: the attempt fails with the decoded reason; the request fails at its last attempt,
 *   otherwise the relay stage makes the next attempt (new nonce); AlreadySponsored is checked against the
 *   treasury's Sponsored events, found by the hash of the request id they carry (was it this request, through a
 *   transaction hash we sent? then it is completed);
 * - a fill mined: the attempts at that nonce are cancelled; the request fails if that was its last attempt;
 * - no receipt for any of our hashes (seen twice by one endpoint asked for nonce and receipts together): the
 *   nonce was used elsewhere, the attempts are dropped.
 * Both checks against the Sponsored events wait while no endpoint has searched every block (one behind). A provider
 * that refuses the search (LogsRefusedError: not served, rate limited, too large even over a few blocks) is waited
 * out for replayPatienceMs per group,
 * then the group is decided without the events, as if none was found, and a warning says so: before, the refusal
 * failed the whole confirm stage at each pass, so nothing was broadcast again, replaced or filled for any relayer,
 * and after 30 passes the worker exited as stuck, again at each restart.
 * Every write runs in a pipelined transaction (db/sql/transaction.ts), like the other stages'.
 */

type Settled = { group: Group; winner: OpenNonceTransaction; receipt: MinedReceipt };

/** Settles the consumed groups; answers how many were settled. */
export async function settle(ctx: WorkerContext, state: ConfirmState, consumed: Group[]): Promise<number> {
  if (consumed.length === 0) return 0;
  const receipts = await ctx.chain.receipts(consumed.flatMap((g) => g.rows.map((r) => r.transactionHash)));
  // A used nonce without a receipt for any of our hashes is asked again, nonce and receipts in one request: the
  // nonce was read before from whichever endpoint answered, and an endpoint a block behind it has no receipt yet.
  // Only such one-endpoint views count as evidence of a nonce used elsewhere (seen twice, SUSPECT_CONFIRM_MS apart);
  // no endpoint answering the whole request, or a group left for a later request, is no evidence this pass.
  const unexplained = oneRequestOf(
    consumed.filter((g) => !g.rows.some((r) => receipts.get(r.transactionHash))),
    ctx.chain.batchSize,
  );
  const usedThrough = new Map<Group, number>();
  if (unexplained.length > 0) {
    const view = await ctx.chain.receiptsWithNonces(
      unexplained.flatMap((g) => g.rows.map((r) => r.transactionHash)),
      [...new Set(unexplained.map((g) => g.relayer))],
      state.settledAt,
    );
    for (const [hash, receipt] of view?.receipts ?? []) if (receipt) receipts.set(hash, receipt);
    for (const g of view ? unexplained : []) usedThrough.set(g, view!.nonces.get(g.relayer) ?? 0);
  }
  const successes: Settled[] = [];
  const reverts: Settled[] = [];
  const fills: Settled[] = [];
  const dropped: Group[] = [];
  const now = performance.now();
  for (const group of consumed) {
    const k = key(group.relayer, group.nonce);
    const winner = group.rows.find((r) => receipts.get(r.transactionHash));
    if (!winner) {
      // Not asked again, or the endpoint that answered both does not have the nonce used yet (it is behind).
      if ((usedThrough.get(group) ?? 0) <= group.nonce) continue;
      const since = state.noReceiptSince.get(k);
      if (since === undefined) state.noReceiptSince.set(k, now);
      else if (now - since >= SUSPECT_CONFIRM_MS) dropped.push(group);
      continue;
    }
    state.noReceiptSince.delete(k);
    const receipt = receipts.get(winner.transactionHash)!;
    if (winner.kind === "fill") fills.push({ group, winner, receipt });
    else if (receipt.status === "success") successes.push({ group, winner, receipt });
    else reverts.push({ group, winner, receipt });
  }

  // One group's failure holds no other group (PartFailures: an outage stops here, anything else after the rest).
  const parts = new PartFailures();
  let settled = 0;
  if (successes.length > 0) settled += await parts.run(() => settleSuccesses(ctx, state, successes), 0);
  for (const r of reverts) settled += await parts.run(() => settleRevert(ctx, state, r), 0);
  for (const f of fills) settled += await parts.run(() => settleFill(ctx, state, f), 0);
  if (dropped.length > 0) settled += await parts.run(() => settleDropped(ctx, state, dropped), 0);
  parts.rethrow();
  return settled;
}

/**
 * The first groups whose hashes and relayers fit one batched request of `batchSize` calls (the rest wait for a later
 * pass). The first group is taken even when it alone does not fit (more attempts at one nonce than a provider's
 * RPC_BATCH_SIZE allows): its calls are then split over several requests, which a pool of nodes may answer from two
 * (a dropped verdict still needs the nonce seen used without a receipt twice, SUSPECT_CONFIRM_MS apart); left out,
 * that group and every group after it would never be asked.
 */
export function oneRequestOf(groups: Group[], batchSize: number): Group[] {
  const taken: Group[] = [];
  const relayers = new Set<string>();
  let calls = 0;
  for (const g of groups) {
    const more = g.rows.length + (relayers.has(g.relayer) ? 0 : 1);
    if (taken.length > 0 && calls + more > batchSize) break;
    calls += more;
    relayers.add(g.relayer);
    taken.push(g);
  }
  return taken;
}

async function settleSuccesses(ctx: WorkerContext, state: ConfirmState, items: Settled[]): Promise<number> {
  const mined: MinedRelay[] = items.map((i) => ({ id: i.winner.id, blockNumber: i.receipt.blockNumber, gasUsed: i.receipt.gasUsed }));
  const losers: RelayFailure[] = [];
  const loserFills: RelayFailure[] = [];
  for (const { group, winner } of items) {
    const reason = `superseded: attempt ${winner.relayAttempt} (${winner.transactionHash}) was mined at nonce ${group.nonce}`;
    for (const r of group.rows) {
      if (r.id === winner.id || !isOpen(r)) continue;
      (r.kind === "relay" ? losers : loserFills).push({ id: r.id, reason });
    }
  }
  // One round trip: BEGIN, the attempts confirmed, the losers failed, the requests of the confirmed attempts
  // completed, COMMIT (each statement sees what the previous ones did).
  const completed = await pipelinedTransaction(ctx.db, async (tx) => {
    const writes = [
      ...confirmRelays(mined),
      ...(losers.length > 0 ? [failRelays(losers)] : []),
      ...(loserFills.length > 0 ? [failNonceFills(loserFills)] : []),
    ];
    const complete = completeRequestsOfConfirmed(
      mined.map((m) => m.id),
      ctx.actor,
      "relay transaction mined and confirmed",
    );
    const answers = await tx.commit([...writes, complete]);
    return complete.parse(answers[answers.length - 1]!);
  });
  ctx.status.totals.completed += completed.length;
  metrics.finished(completed);
  for (const { winner, receipt } of items) {
    metrics.confirmed(winner.relayerAddress);
    ctx.log.info("request completed", {
      requestId: winner.sponsorshipRequestId,
      hash: winner.transactionHash,
      attempt: winner.relayAttempt,
      relayer: winner.relayerAddress,
      nonce: winner.nonce,
      block: receipt.blockNumber,
    });
    state.noteSettled(winner);
  }
  return items.length;
}

/** Closes the attempts of a group that were not mined, and fails their requests that have no attempt left. */
async function closeGroup(
  ctx: WorkerContext,
  tx: PipelinedTransaction,
  group: Group,
  winnerId: string | undefined,
  reason: string,
  requestFailure: (attempts: number) => string | undefined,
): Promise<void> {
  const requestIds = [...new Set(group.rows.filter((r) => r.kind === "relay" && isOpen(r)).map((r) => r.sponsorshipRequestId!))];
  const winner = group.rows.find((r) => r.id === winnerId);
  if (winner?.kind === "relay" && winner.sponsorshipRequestId && !requestIds.includes(winner.sponsorshipRequestId)) {
    requestIds.push(winner.sponsorshipRequestId);
  }
  for (const requestId of requestIds.sort()) {
    const failures = group.rows
      .filter((r) => r.kind === "relay" && r.sponsorshipRequestId === requestId && r.id !== winnerId && isOpen(r))
      .map((r) => ({ id: r.id, reason }));
    // The request locked and its burned attempts counted, its unmined attempts here failed, then what is still open
    // counted: one batch, each statement seeing what the previous ones did.
    const lock = lockRequest(requestId);
    const count = countOpenAttempts(requestId);
    const answers = await tx.run([...lock, ...(failures.length > 0 ? [failRelays(failures)] : []), count]);
    const status = lock[0].parse(answers[0]!);
    const attempts = lock[1].parse(answers[1]!).burned;
    const open = count.parse(answers[answers.length - 1]!);
    if (status !== "relayed") continue;
    // Another attempt still open (at another nonce: made by a worker that took the relayer over while this one
    // was paused on what it had read) could still be mined: only its own settlement may fail the request.
    if (open > 0) continue;
    const failure = requestFailure(attempts);
    const [failed] = failure ? await tx.send([failRequest(requestId, ctx.actor, failure)]) : [undefined];
    if (failed) {
      metrics.finished([failed]);
      ctx.status.totals.failed++;
      ctx.log.warn("request failed", { requestId, attempts, reason: failure });
    }
  }
  const fillFailures = group.rows.filter((r) => r.kind === "fill" && r.id !== winnerId && isOpen(r)).map((r) => ({ id: r.id, reason }));
  if (fillFailures.length > 0) await tx.send([failNonceFills(fillFailures)]);
}

async function settleRevert(ctx: WorkerContext, state: ConfirmState, { group, winner, receipt }: Settled): Promise<number> {
  const requestId = winner.sponsorshipRequestId!;
  const answer = await ctx.chain.explainSponsorRevert(winner.relayerAddress, winner.walletAddress!, requestId, receipt.blockNumber);
  // No answer (the node unreachable, or behind): this group waits for one, the others are settled meanwhile.
  const k = key(group.relayer, group.nonce);
  const waitingSince = state.unexplainedSince.get(k) ?? performance.now();
  const patience = ctx.settings.replayPatienceMs;
  if (!answer && performance.now() - waitingSince < patience) {
    if (!state.unexplainedSince.has(k))
      ctx.log.warn("a revert waits for the node to answer its replay", { requestId, nonce: group.nonce, relayer: group.relayer });
    state.unexplainedSince.set(k, waitingSince);
    return 0;
  }
  state.unexplainedSince.delete(k);
  const explained = answer ?? { text: `reverted on-chain (reason not available: the node did not answer the replay for ${patience / 1000} s)` };
  const reason = `${explained.text} (block ${receipt.blockNumber})`;
  const superseded = `superseded: attempt ${winner.relayAttempt} at nonce ${group.nonce} was mined and reverted`;

  // AlreadySponsored: did one of this request's own transactions pay it (a hash we sent at another nonce)?
  if (explained.errorName === "AlreadySponsored") {
    const search = await sponsoredEvents(ctx, state, [group], [requestId]);
    // No endpoint has every block searched yet (one a block behind answered), or the refused search's patience runs:
    // a later pass decides.
    if (search === undefined || search.ready.length === 0) return 0;
    const event = search.events.get(requestId);
    const ours = event ? await run(ctx.db, findRelayByHash(event.transactionHash)) : undefined;
    if (event && ours) {
      const [paid] = (await ctx.chain.receipts([event.transactionHash])).values();
      await pipelinedTransaction(ctx.db, async (tx) => {
        await tx.send([...lockRequest(requestId), markRelaysMined([winner.id]), failRelays([{ id: winner.id, reason }])]);
        await closeGroup(ctx, tx, group, winner.id, superseded, () => undefined);
        const [, ids] = await tx.send(confirmRelays([{ id: ours.id, blockNumber: event.blockNumber, gasUsed: paid?.gasUsed ?? 0n }]));
        if (ids.length > 0)
          metrics.finished((await tx.send([completeRequests(ids, ctx.actor, `relay transaction ${event.transactionHash} mined and confirmed`)]))[0]);
      });
      ctx.status.totals.completed++;
      ctx.log.info("request completed (found by its Sponsored event)", { requestId, hash: event.transactionHash });
      return 1;
    }
  }

  // A revert of the service's own making (treasury paused or short, relayer not authorised) burns no attempt:
  // the relay is failed with SERVICE_STATE_FAILURE and the request waits (the relay stage checks all three
  // before it sends again).
  const serviceState = explained.errorName !== undefined && SERVICE_STATE_REVERTS.has(explained.errorName);
  const relayReason = serviceState ? `${SERVICE_STATE_FAILURE} ${reason}` : reason;
  await pipelinedTransaction(ctx.db, async (tx) => {
    // Mined, so a node took it: recorded as broadcast before it is failed (it burns an attempt unless the revert is
    // the service's own, markRelaysMined).
    await tx.send([...lockRequest(requestId), markRelaysMined([winner.id]), failRelays([{ id: winner.id, reason: relayReason }])]);
    await closeGroup(ctx, tx, group, winner.id, superseded, (attempts) => {
      if (serviceState) return undefined;
      if (explained.errorName === "AlreadySponsored") return "relay failed: the wallet was already sponsored on-chain by another transaction";
      // A revert of the wallet's own making (it refused the transfer): no retry can cure it, so the request fails
      // at once (decisions.md, "Wallets that cannot be paid").
      if (explained.errorName !== undefined && WALLET_REFUSED_REVERTS.has(explained.errorName)) {
        return `payment_refused: the wallet refused the payment (${reason})`;
      }
      return attempts >= ctx.settings.maxRelayAttempts ? `relay failed after ${attempts} attempts; last: ${reason}` : undefined;
    });
  });
  ctx.status.totals.failedAttempts++;
  metrics.failure(winner.relayerAddress, "reverted");
  ctx.log.warn("relay attempt reverted", {
    requestId,
    attempt: winner.relayAttempt,
    hash: winner.transactionHash,
    relayer: winner.relayerAddress,
    nonce: winner.nonce,
    reason,
  });
  state.noteSettled(winner);
  return 1;
}

async function settleFill(ctx: WorkerContext, state: ConfirmState, { group, winner, receipt }: Settled): Promise<number> {
  const reason = `cancelled: nonce ${group.nonce} was filled by ${winner.transactionHash} (block ${receipt.blockNumber})`;
  await pipelinedTransaction(ctx.db, async (tx) => {
    await closeGroup(ctx, tx, group, winner.id, reason, (attempts) =>
      attempts >= ctx.settings.maxRelayAttempts
        ? `relay failed after ${attempts} attempts: none was mined within the relay timeout; the last was cancelled`
        : undefined,
    );
    await tx.send(confirmNonceFill(winner.id, receipt.blockNumber));
  });
  ctx.log.info("nonce fill mined", { relayer: group.relayer, nonce: group.nonce, hash: winner.transactionHash, requestId: winner.sponsorshipRequestId });
  state.noteSettled(winner);
  return 1;
}

/**
 * The treasury's Sponsored events of `requestIds` (of `groups`), and the groups that may be decided with them:
 * undefined while no endpoint has every block searched ("no event" cannot be told yet); all the groups once the
 * search is answered; when every endpoint refuses it (LogsRefusedError), no events and only the groups that have
 * waited replayPatienceMs since the first refusal (decided as if no event was found; logged).
 */
async function sponsoredEvents(
  ctx: WorkerContext,
  state: ConfirmState,
  groups: Group[],
  requestIds: string[],
): Promise<{ events: Map<string, { transactionHash: Hash; blockNumber: bigint }>; ready: Group[] } | undefined> {
  try {
    const events = await ctx.chain.findSponsoredEvents(requestIds, { throughBlock: state.settledAt });
    if (events !== undefined) for (const g of groups) state.unsearchedSince.delete(key(g.relayer, g.nonce));
    return events && { events, ready: groups };
  } catch (error) {
    if (!(error instanceof LogsRefusedError)) throw error;
    const now = performance.now();
    const patience = ctx.settings.replayPatienceMs;
    const ready: Group[] = [];
    for (const g of groups) {
      const k = key(g.relayer, g.nonce);
      const since = state.unsearchedSince.get(k);
      const fields = { relayer: g.relayer, nonce: g.nonce, error: error.message };
      if (since === undefined) {
        state.unsearchedSince.set(k, now);
        ctx.log.warn(`the RPC refuses the search for Sponsored events: the nonce is decided without it in ${patience / 1000} s`, fields);
      } else if (now - since >= patience) {
        state.unsearchedSince.delete(k);
        ctx.log.warn("nonce decided without the Sponsored events: the RPC refused the search (eth_getLogs) throughout", fields);
        ready.push(g);
      }
    }
    return { events: new Map(), ready };
  }
}

async function settleDropped(ctx: WorkerContext, state: ConfirmState, consumed: Group[]): Promise<number> {
  const requestIds = [...new Set(consumed.flatMap((g) => g.rows.filter((r) => r.kind === "relay").map((r) => r.sponsorshipRequestId!)))];
  const search = await sponsoredEvents(ctx, state, consumed, requestIds);
  // No endpoint has every block searched yet: "no event" cannot be told yet, so nothing is taken as dropped now.
  if (search === undefined) return 0;
  const { events, ready: groups } = search;
  let settled = 0;
  for (const group of groups) {
    // The chain's own record first: a Sponsored event naming one of this group's hashes means it was mined.
    const paidBy = group.rows.find((r) => r.kind === "relay" && events.get(r.sponsorshipRequestId!)?.transactionHash.toLowerCase() === r.transactionHash);
    if (paidBy) {
      const event = events.get(paidBy.sponsorshipRequestId!)!;
      await settleSuccesses(ctx, state, [{ group, winner: paidBy, receipt: { status: "success", blockNumber: event.blockNumber, gasUsed: 0n } }]);
      settled++;
      continue;
    }
    const reason = `dropped: nonce ${group.nonce} of ${group.relayer} was used by a transaction this service did not send`;
    await pipelinedTransaction(ctx.db, async (tx) => {
      await closeGroup(ctx, tx, group, undefined, reason, (attempts) =>
        attempts >= ctx.settings.maxRelayAttempts ? `relay failed after ${attempts} attempts; last: ${reason}` : undefined,
      );
    });
    ctx.status.totals.failedAttempts++;
    metrics.failure(group.relayer, "dropped");
    ctx.log.warn("relay attempt dropped", { relayer: group.relayer, nonce: group.nonce, hashes: group.rows.map((r) => r.transactionHash) });
    state.noReceiptSince.delete(key(group.relayer, group.nonce));
    settled++;
  }
  return settled;
}
