import { parseTransaction, type Address, type Hash, type Hex } from "viem";
import { failUnsentNonceFills, markFillsSubmitted } from "@/db/queries/nonce-fills";
import { failUnsentRelays, failUsedUpRequests, markRelaysSubmitted } from "@/db/queries/relay-outcomes";
import { REFUSED_BEFORE_BROADCAST } from "@/db/queries/relay-queue";
import type { Statement } from "@/db/sql/run";
import { pipelinedTransaction } from "@/db/sql/transaction";
import { INSUFFICIENT_FUNDS, type BroadcastOutcome } from "../chain-answers";
import type { WorkerContext } from "../context";
import { metrics } from "../metrics";

/**
 * Broadcast of transactions already stored (hash and raw bytes in the database): the only way anything reaches the
 * chain. Outcomes:
 * - accepted (or "already known"): recorded as submitted (what it replaces at its nonce stays open until the
 *   nonce is settled: it could still be the one mined);
 * - nonce already used: left as is, the confirm stage settles the nonce from receipts (it may be this very hash);
 * - node unreachable or temporarily refusing: left queued, broadcast again later; no attempt is consumed;
 * - refused for good: the attempt (or fill) fails with the node's words, if no node ever accepted it (still queued):
 *   nothing was broadcast. One accepted before and refused when sent again (a node that dropped it, a pool that
 *   wants a higher fee now) may still be mined elsewhere: it stays open, and the stuck timer replaces it;
 * - refused while the relayer cannot pay the transaction's own maximum cost (gas limit x max fee + value), whatever
 *   the node's words: no gas money, which is waited out like an unavailable node (the relayer is reported).
 * Each outcome that says whether the relayer can pay (accepted; refused for want of funds; a balance read that covers
 * the transaction) is recorded with its time in `ctx.status.relayerGas`, what `relayer.out_of_gas` reports.
 */

/** The most the transaction can cost its sender: gas limit x (max) fee per gas + value; undefined if unreadable. */
function maxCost(raw: Hex): bigint | undefined {
  try {
    const tx = parseTransaction(raw);
    const feePerGas = tx.maxFeePerGas ?? tx.gasPrice;
    if (tx.gas === undefined || feePerGas === undefined) return undefined;
    return tx.gas * feePerGas + (tx.value ?? 0n);
  } catch {
    return undefined;
  }
}

/**
 * Refusals the node did not word as "insufficient funds": checked against the relayer's balance, so a node with
 * other words for it (or none) cannot make the worker burn attempts of a relayer that merely needs funding. A balance
 * that covers the transaction is an observation too: the relayer has gas money, the refusal was for something else.
 */
async function recheckRefusals(ctx: WorkerContext, txs: readonly StoredTransaction[], outcomes: BroadcastOutcome[]): Promise<Set<string>> {
  const unfunded = new Set<string>();
  const refused = txs.map((tx, i) => ({ tx, i })).filter(({ i }) => outcomes[i]!.kind === "rejected");
  if (refused.length === 0) return unfunded;
  const readAt = performance.now();
  const balances = await ctx.chain.balances([...new Set(refused.map(({ tx }) => tx.relayer as Address))]).catch(() => undefined);
  if (!balances) return unfunded;
  for (const { tx, i } of refused) {
    const outcome = outcomes[i]!;
    const cost = maxCost(tx.raw);
    const balance = balances.get(tx.relayer as Address);
    if (outcome.kind !== "rejected" || cost === undefined || balance === undefined) continue;
    if (balance >= cost) {
      ctx.status.relayerGas.set(tx.relayer, { withoutGas: false, seenAtMs: readAt });
      continue;
    }
    outcomes[i] = { kind: "unavailable", message: `relayer balance ${balance} wei is below the transaction's maximum cost ${cost} wei (${outcome.message})` };
    unfunded.add(tx.relayer);
  }
  return unfunded;
}

export type StoredTransaction = {
  kind: "relay" | "fill";
  id: string;
  hash: Hash;
  raw: Hex;
  /** For logs: the request, relayer and nonce. */
  requestId?: string | null;
  relayer: string;
  nonce: number;
  /** The relay attempt number (relays only). */
  attempt?: number;
};

export type BroadcastSummary = { accepted: number; unavailable: number; rejected: number; nonceUsed: number };

/**
 * When each transaction was first answered with a node's own failure (-32603, "internal error"...), by hash: such an
 * answer is waited out, but not for ever. One that a node keeps failing on for RELAY_TIMEOUT_MS (while the chain
 * answers otherwise) is taken as a refusal: a gateway that words a verdict as a failure ("upstream error: intrinsic
 * gas too low") would otherwise hold the request, and every later nonce of its relayer, without end and unseen.
 */
const nodeFailingSince = new WeakMap<WorkerContext, Map<string, number>>();

function boundNodeFailures(ctx: WorkerContext, txs: readonly StoredTransaction[], outcomes: BroadcastOutcome[], now: number): void {
  let since = nodeFailingSince.get(ctx);
  if (!since) nodeFailingSince.set(ctx, (since = new Map()));
  // A transaction settled another way is never broadcast again: its entry goes once it is old.
  for (const [hash, first] of since) if (now - first > 10 * ctx.settings.relayTimeoutMs) since.delete(hash);
  txs.forEach((tx, i) => {
    const outcome = outcomes[i]!;
    if (outcome.kind !== "unavailable" || !outcome.nodeFailure) {
      since.delete(tx.hash);
      return;
    }
    const first = since.get(tx.hash);
    if (first === undefined) {
      since.set(tx.hash, now);
      return;
    }
    const failingMs = now - first;
    if (ctx.chain.health.reachableWithinMs(failingMs) < ctx.settings.relayTimeoutMs) return;
    since.delete(tx.hash);
    outcomes[i] = { kind: "rejected", message: `${outcome.message} (the node failed on it for ${Math.round(failingMs / 1000)} s: taken as a refusal)` };
  });
}

export async function broadcastStored(ctx: WorkerContext, txs: readonly StoredTransaction[], why: "first" | "again"): Promise<BroadcastSummary> {
  const summary: BroadcastSummary = { accepted: 0, unavailable: 0, rejected: 0, nonceUsed: 0 };
  if (txs.length === 0) return summary;
  // Nonce order within each relayer, so the node never sees a gap it could drop.
  const ordered = [...txs].sort((a, b) => (a.relayer === b.relayer ? a.nonce - b.nonce : a.relayer < b.relayer ? -1 : 1));
  const sentAt = performance.now();
  const outcomes = await ctx.chain.broadcast(ordered.map((t) => t.raw));
  boundNodeFailures(ctx, ordered, outcomes, sentAt);
  const unfunded = await recheckRefusals(ctx, ordered, outcomes);

  const accepted: Hash[] = [];
  const acceptedFills: Hash[] = [];
  const rejectedRelays: { id: string; reason: string }[] = [];
  const refusedRequests: { requestId: string; reason: string }[] = [];
  const rejectedFills: { id: string; reason: string }[] = [];
  let unavailableMessage: string | undefined;
  ordered.forEach((tx, i) => {
    const outcome = outcomes[i]!;
    switch (outcome.kind) {
      case "accepted":
        ctx.status.relayerGas.set(tx.relayer, { withoutGas: false, seenAtMs: sentAt });
        accepted.push(tx.hash);
        if (tx.kind === "fill") acceptedFills.push(tx.hash);
        break;
      case "nonce_used":
        summary.nonceUsed++;
        break;
      case "unavailable":
        summary.unavailable++;
        unavailableMessage = outcome.message;
        // Shown in the heartbeat and by /health (worker "degraded") until the relayer is funded.
        if (unfunded.has(tx.relayer) || INSUFFICIENT_FUNDS.test(outcome.message)) {
          ctx.status.relayerGas.set(tx.relayer, { withoutGas: true, seenAtMs: sentAt, neededWei: maxCost(tx.raw) });
        }
        break;
      case "rejected": {
        const reason = `${REFUSED_BEFORE_BROADCAST} ${outcome.message.slice(0, 300)}`;
        (tx.kind === "relay" ? rejectedRelays : rejectedFills).push({ id: tx.id, reason });
        if (tx.kind === "relay" && tx.requestId) refusedRequests.push({ requestId: tx.requestId, reason });
        break;
      }
    }
  });
  summary.accepted = accepted.length;

  if (why === "first") ctx.status.totals.broadcasts += accepted.length;
  else ctx.status.totals.rebroadcasts += accepted.length;

  // Test hook (issue 4 "Crash"): die the hardest way right after the broadcast, before recording it.
  const crashAt = ctx.settings.crashAfterBroadcasts;
  if (crashAt !== undefined && why === "first" && ctx.status.totals.broadcasts >= crashAt && accepted.length > 0) {
    ctx.log.warn("test hook: SIGKILL right after broadcast", { broadcasts: ctx.status.totals.broadcasts, hashes: accepted });
    process.kill(process.pid, "SIGKILL");
    await new Promise(() => {});
  }

  // One round trip: BEGIN, the statements that have rows, COMMIT.
  const writes: Statement[] = [];
  const acceptedRelays = accepted.filter((h) => !acceptedFills.includes(h));
  if (acceptedRelays.length > 0) writes.push(markRelaysSubmitted(acceptedRelays));
  if (acceptedFills.length > 0) writes.push(markFillsSubmitted(acceptedFills));
  // The refusals, last: each answers the ids it failed (only those no node ever accepted).
  const fails = [
    ...(rejectedRelays.length > 0 ? [failUnsentRelays(rejectedRelays)] : []),
    ...(rejectedFills.length > 0 ? [failUnsentNonceFills(rejectedFills)] : []),
  ];
  // Then the requests whose last attempt that was (burned attempts at MAX_RELAY_ATTEMPTS, nothing else open): failed
  // here, not left to the relay stage, which a pause or the treasury can hold back for as long as it lasts.
  const usedUp = refusedRequests.length > 0 ? failUsedUpRequests(refusedRequests, ctx.actor, ctx.settings.maxRelayAttempts) : undefined;
  const failed = new Set<string>();
  if (writes.length + fails.length > 0) {
    const answers = await pipelinedTransaction(ctx.db, (tx) => tx.commit([...writes, ...fails, ...(usedUp ? [usedUp] : [])]));
    fails.forEach((q, i) => q.parse(answers[writes.length + i]!).forEach((id) => failed.add(id)));
    const finished = usedUp ? usedUp.parse(answers[writes.length + fails.length]!) : [];
    if (finished.length > 0) {
      metrics.finished(finished);
      ctx.status.totals.failed += finished.length;
      for (const request of finished) ctx.log.warn("request failed: its last attempt was refused by the node", { requestId: request.id });
    }
  }
  ordered.forEach((tx, i) => {
    const outcome = outcomes[i]!;
    if (outcome.kind !== "rejected") return;
    const fields = { kind: tx.kind, requestId: tx.requestId, relayer: tx.relayer, nonce: tx.nonce, hash: tx.hash, message: outcome.message };
    if (failed.has(tx.id)) {
      summary.rejected++;
      if (tx.kind === "relay") {
        ctx.status.totals.failedAttempts++;
        metrics.failure(tx.relayer, "rpc_error");
      }
      ctx.log.warn("transaction refused by the node", fields);
    } else {
      ctx.log.warn("transaction refused when sent again: left open, it was accepted before and may still be mined", fields);
    }
  });
  if (summary.unavailable > 0) {
    ctx.log.warn("broadcast postponed: node unavailable, the stored transactions will be sent again", {
      count: summary.unavailable,
      message: unavailableMessage,
    });
  }
  return summary;
}
