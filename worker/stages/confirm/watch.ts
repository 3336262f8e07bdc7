import type { Address } from "viem";
import { readRawTransactions, type OpenNonceTransaction } from "@/db/queries/nonce-groups";
import { run } from "@/db/sql/run";
import type { RelayerNonces } from "../../chain-answers";
import { currentFees, type WorkerContext } from "../../context";
import { broadcastStored } from "../broadcast";
import { replace } from "./replace";
import { isOpen, key, toStored, type ConfirmState, type Group } from "./state";

const REBROADCAST_EVERY_MS = 3_000;

/**
 * Watching the groups not settled yet: a stored transaction the node does not hold (queued after a crash or an
 * outage, or lost: pending nonce below it) is broadcast again from its stored bytes; one unmined for
 * RELAY_TIMEOUT_MS (the time the chain was unreachable not counted) is handed to ./replace.ts: one a node took, or one
 * no node took yet whose max fee the base fee has risen above.
 */
export async function watch(ctx: WorkerContext, state: ConfirmState, groups: Group[], nonces: Map<Address, RelayerNonces>): Promise<void> {
  const now = performance.now();
  const resend: OpenNonceTransaction[] = [];
  const stuck: Group[] = [];
  const neverAccepted: { group: Group; maxFeePerGas: bigint }[] = [];
  for (const group of groups) {
    const open = group.rows.filter(isOpen);
    if (open.length === 0) continue;
    // The newest open transaction is the one the node should hold (a refused replacement is closed, so the one it
    // was to replace is the newest open again).
    const latestOpen = open[open.length - 1]!;
    const pending = nonces.get(group.relayer)?.pending ?? 0;
    // Never accepted by the node yet (queued: crash or outage before the broadcast was recorded), or lost by it
    // (the node's pending nonce stops below this nonce): send the stored bytes again.
    const notHeld = latestOpen.status === "queued" || group.nonce >= pending;
    if (notHeld && now - (state.lastSent.get(latestOpen.transactionHash) ?? Number.NEGATIVE_INFINITY) >= REBROADCAST_EVERY_MS) resend.push(latestOpen);
    // Unmined since it was accepted (submitted) or, never accepted (queued), since it was stored.
    const since = latestOpen.status === "submitted" ? latestOpen.submittedAgeMs : latestOpen.createdAgeMs;
    if (since === null) continue;
    // Time spent mined (waiting to be deep enough) is not time unmined: after a reorg the clock starts again.
    const droppedAt = state.droppedByReorgAt.get(key(group.relayer, group.nonce));
    // A replacement the node refused (stored after it, now closed) restarts the clock too: one try per timeout.
    const newest = group.rows[group.rows.length - 1]!;
    const sinceReplacement = newest.id === latestOpen.id ? Number.POSITIVE_INFINITY : newest.createdAgeMs;
    // Time the chain could not be asked does not count (ChainHealth.reachableWithinMs).
    const age = Math.min(ctx.chain.health.reachableWithinMs(since), droppedAt === undefined ? Number.POSITIVE_INFINITY : now - droppedAt, sinceReplacement);
    if (age < ctx.settings.relayTimeoutMs) continue;
    // Behind a gap (the node lacks an earlier nonce of the relayer: being sent again, or a hole ./holes.ts fills), it
    // waits for the gap, not for a fee: a replacement could not be mined either, and replacing it every timeout
    // raised its fees by 12.5% each time (about a thousandfold an hour) for as long as the gap lasted.
    const held = nonces.get(group.relayer);
    if (held !== undefined && group.nonce > held.pending) continue;
    if (latestOpen.status === "submitted") stuck.push(group);
    else neverAccepted.push({ group, maxFeePerGas: latestOpen.maxFeePerGas });
  }
  // A transaction no node has taken yet waits while the reason is one waiting mends (an outage, a relayer without
  // gas money, an earlier nonce the node lacks), but a max fee the base fee has risen above is mended only by a fall
  // of the base fee, which may never come: the node refuses it (BELOW_BASE_FEE) and every later nonce of the relayer
  // waits behind it. It is replaced like a stuck one, at the market's fees.
  if (neverAccepted.length > 0) {
    const { baseFeePerGas } = await currentFees(ctx);
    for (const { group, maxFeePerGas } of neverAccepted) if (maxFeePerGas < baseFeePerGas) stuck.push(group);
  }
  if (resend.length > 0) {
    const raws = await run(ctx.db, readRawTransactions(resend.map((r) => r.transactionHash)));
    const summary = await broadcastStored(
      ctx,
      resend.filter((r) => raws.has(r.transactionHash)).map((r) => toStored(r, raws.get(r.transactionHash)!)),
      "again",
    );
    state.noteSent(resend.map((r) => r.transactionHash));
    if (summary.accepted > 0)
      ctx.log.info("stored transactions broadcast again", {
        count: summary.accepted,
        nonces: resend.slice(0, 20).map((r) => `${r.relayerAddress}:${r.nonce}`),
      });
  }
  for (const group of stuck.slice(0, ctx.settings.batchSize)) await replace(ctx, state, group);
}
