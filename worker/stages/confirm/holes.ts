import type { Address } from "viem";
import { listConfirmedRawTransactionsFrom } from "@/db/queries/chain-replay";
import { countNonceFills, insertNonceFill } from "@/db/queries/nonce-fills";
import { listRelayerLeases, lockLeasedRelayers, setRelayerNextNonces } from "@/db/queries/relayers";
import { pipelinedTransaction } from "@/db/sql/transaction";
import type { RelayerNonces } from "../../chain-answers";
import { currentFees, type WorkerContext } from "../../context";
import { LeaseLostError } from "../../relayers";
import { signFill, storedFill } from "../attempts";
import { broadcastStored } from "../broadcast";
import { key, SUSPECT_CONFIRM_MS, type ConfirmState, type Group } from "./state";

/**
 * Nonce holes: a nonce below the relayer's next nonce that the node does not hold and nothing stored is open for
 * (its transaction was refused, or the node lost it and nothing was stored, or the chain lost the block of one that
 * reverted): every later nonce waits behind it. Seen twice a second apart, it is filled (../attempts.ts signs the
 * fill), unless a transaction stored as confirmed holds it: the chain lost what it had mined, and the stored bytes
 * are sent again instead. A relayer whose chain
 * nonce is ahead of the database (its key was used outside the service) has its next nonce moved past them.
 * Answers true when every relayer's next nonce is exactly the chain's pending nonce (no hole, nothing used outside).
 */
export async function fillHoles(
  ctx: WorkerContext,
  state: ConfirmState,
  relayers: Address[],
  nonces: Map<Address, RelayerNonces>,
  groups: Map<string, Group>,
): Promise<boolean> {
  const leases = await listRelayerLeases(ctx.db, relayers);
  const now = performance.now();
  let clear = leases.length === relayers.length;
  for (const lease of leases) {
    const n = nonces.get(lease.address);
    if (!n) {
      clear = false;
      continue;
    }
    if (n.pending !== lease.nextNonce || n.latest !== n.pending) clear = false;
    if (n.pending > lease.nextNonce) {
      // The key was used outside the service: move past the nonces it took, or every new attempt collides.
      await pipelinedTransaction(ctx.db, async (tx) => {
        const [fence] = await tx.send([lockLeasedRelayers(ctx.workerId, [lease.address])]);
        const current = fence.get(lease.address);
        if (current !== undefined && current < n.pending) await tx.send([setRelayerNextNonces(ctx.workerId, new Map([[lease.address, n.pending]]))]);
      });
      ctx.log.warn("relayer nonce ahead of the database: the key was used outside this service", {
        relayer: lease.address,
        chainPending: n.pending,
        nextNonce: lease.nextNonce,
      });
      continue;
    }
    const hole = n.pending;
    const k = key(lease.address, hole);
    if (lease.nextNonce <= hole || groups.has(k)) {
      for (const h of state.holeSince.keys()) if (h.startsWith(`${lease.address}:`)) state.holeSince.delete(h);
      continue;
    }
    // Transactions stored as confirmed at this nonce or after it: the chain lost blocks that held them (a local chain
    // restarted from an older state dump, a reorg deeper than CONFIRMATIONS). Their stored bytes are sent again, in
    // nonce order (same hashes: each wallet paid once), never filled over. If none was confirmed at the hole itself
    // (what the chain lost there was an attempt that reverted, stored failed), the hole is filled first, below: the
    // confirmed ones after it could never be mined over it, and everything later of the relayer would wait for ever.
    const lost = await listConfirmedRawTransactionsFrom(ctx.db, [{ relayer: lease.address, nonce: hole }]);
    if (lost.length > 0 && lost[0]!.nonce === hole) {
      state.holeSince.delete(k);
      const outcomes = await ctx.chain.broadcast(lost.map((t) => t.raw));
      ctx.log.warn("the chain lost confirmed transactions: sent again", {
        relayer: lease.address,
        fromNonce: hole,
        lost: lost.length,
        accepted: outcomes.filter((o) => o.kind === "accepted").length,
      });
      continue;
    }
    const since = state.holeSince.get(k);
    if (since === undefined) {
      state.holeSince.set(k, now);
      continue;
    }
    if (now - since < SUSPECT_CONFIRM_MS) continue;
    state.holeSince.delete(k);
    const fees = await currentFees(ctx);
    // Above the fee ceiling a fill could not be mined either: it is filled once fees fall.
    if (fees.aboveCeiling) continue;
    const stored = await pipelinedTransaction(ctx.db, async (tx) => {
      const [fence, earlier] = await tx.send([lockLeasedRelayers(ctx.workerId, [lease.address]), countNonceFills(lease.address, hole)]);
      if (!fence.has(lease.address)) throw new LeaseLostError(`lease of ${lease.address} lost before filling nonce ${hole}`);
      const fill = await signFill(ctx, {
        relayer: lease.address,
        nonce: hole,
        fees,
        earlier,
        requestId: null,
        reason: `fill: nonce ${hole} was assigned but the node holds no transaction for it (later nonces were waiting)`,
      });
      const [id] = await tx.send([insertNonceFill(fill)]);
      return storedFill(fill, id);
    });
    ctx.status.totals.fills++;
    ctx.log.warn("nonce gap filled", { relayer: lease.address, nonce: hole, nextNonce: lease.nextNonce, hash: stored.hash });
    await broadcastStored(ctx, [stored], "first");
    state.noteSent([stored.hash]);
  }
  return clear;
}
