import { listOpenNonceGroups } from "@/db/queries/nonce-groups";
import { run } from "@/db/sql/run";
import type { WorkerContext } from "../../context";
import { fillHoles } from "./holes";
import { settle } from "./settle";
import { ConfirmState, key, PartFailures, type Group } from "./state";
import { watch } from "./watch";

/**
 * Confirm (decisions.md "Pipeline"): settles every stored transaction of this worker's relayers, nonce by nonce.
 * Its parts: ./settle.ts (status decisions), ./watch.ts (broadcast again), ./replace.ts (replacement at the same
 * nonce, or a cancel), ./holes.ts (nonce holes); ../attempts.ts signs and stores what replace and holes send.
 *
 * A "nonce group" is everything stored at one (relayer, nonce): an attempt, its same-nonce replacements, a fill.
 * Exactly one transaction per nonce can be mined, so a group is settled once the relayer's mined nonce passes it
 * CONFIRMATIONS - 1 blocks below the head (the nonce at that block: a reorg of fewer blocks cannot undo it): the
 * receipts of all its hashes (one batched request) say which one won. A group mined but not that deep yet waits,
 * neither settled nor watched; if a reorg drops its block, it is watched again like any unmined group (the node no
 * longer holds it: broadcast again from its stored bytes, same hash, no attempt burned).
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
 * Groups not settled yet are watched: a stored transaction the node does not hold (queued after a crash or an
 * outage, or lost: pending nonce below it) is broadcast again from its stored bytes; one unmined for
 * RELAY_TIMEOUT_MS (counted only while the chain was reachable; for one no node took yet, only when its max fee is
 * below the base fee, which only a fall of the base fee mends) is replaced at the same nonce with fees >= +12.5%
 * as the request's next attempt, or, after the last attempt, cancelled by a fill so the request can fail for good.
 * A replaced transaction stays open until its nonce is settled (it may still be the one mined: then it completes its
 * request); a replacement refused for good fails alone, and the newest open transaction is watched again (replaced
 * a timeout later, outbidding everything stored at the nonce). A nonce the database assigned but nothing holds any
 * more (a hole that would block every later nonce) is filled.
 */

export type ConfirmOutcome = { open: number; settled: number };

export class Confirmer {
  private readonly state = new ConfirmState();
  /**
   * The relayers whose last full check (with holes) found nothing open, no hole and no nonce used outside the
   * service: until something is stored for them, there is nothing to watch (the loop then checks rarely).
   */
  private quietRelayers: string | undefined;

  constructor(private readonly ctx: WorkerContext) {}

  /** True when the last full check found these very relayers quiet and nothing was seen open since. */
  isQuiet(relayers: readonly string[]): boolean {
    return this.quietRelayers !== undefined && this.quietRelayers === [...relayers].sort().join(",");
  }

  /** Remembers a broadcast made elsewhere (relay stage), so it is not repeated at once. */
  noteSent(hashes: readonly string[]): void {
    this.state.noteSent(hashes);
  }

  /** `head`: the block number the caller just read (read here when CONFIRMATIONS > 1 and not given). */
  async run(options: { checkHoles: boolean; head?: bigint }): Promise<ConfirmOutcome> {
    const { ctx } = this;
    const relayers = ctx.pool.leased;
    if (relayers.length === 0) {
      ctx.status.inFlight = 0;
      return { open: 0, settled: 0 };
    }
    const depth = BigInt(ctx.settings.confirmations);
    if (depth > 1n) {
      const head = options.head ?? (await ctx.chain.blockNumber());
      this.state.settledAt = head >= depth - 1n ? head - (depth - 1n) : 0n;
    } else {
      this.state.settledAt = undefined;
    }
    // Both reads together: no other stage of this worker runs meanwhile, and no other worker touches these relayers.
    const [rows, nonces] = await Promise.all([run(ctx.db, listOpenNonceGroups(relayers)), ctx.chain.nonces(relayers, this.state.settledAt)]);
    if (rows.length > 0) this.quietRelayers = undefined;
    if (rows.length === 0 && !options.checkHoles) {
      ctx.status.inFlight = 0;
      return { open: 0, settled: 0 };
    }
    const groups = new Map<string, Group>();
    for (const row of rows) {
      const k = key(row.relayerAddress, row.nonce);
      let g = groups.get(k);
      if (!g) groups.set(k, (g = { relayer: row.relayerAddress, nonce: row.nonce, rows: [] }));
      g.rows.push(row);
    }

    // Mined deep enough: settle. Mined, not deep enough yet: wait. Not mined (or dropped again by a reorg): watch.
    const consumed: Group[] = [];
    const unconsumed: Group[] = [];
    const now = performance.now(); // in-memory clocks run on performance.now(): a step of the wall clock moves none
    for (const g of groups.values()) {
      const n = nonces.get(g.relayer);
      if (!n) continue;
      const k = key(g.relayer, g.nonce);
      if (g.nonce < n.settled) {
        consumed.push(g);
        this.state.shallow.delete(k);
        this.state.droppedByReorgAt.delete(k);
      } else if (g.nonce < n.latest) {
        this.state.shallow.add(k);
      } else {
        if (this.state.shallow.delete(k)) {
          this.state.droppedByReorgAt.set(k, now);
          ctx.log.warn("mined transaction dropped by a reorg before it was deep enough: watched again", { relayer: g.relayer, nonce: g.nonce });
        }
        unconsumed.push(g);
      }
    }

    // Settling, watching and hole filling go on whatever the others met (PartFailures): a group that cannot be
    // settled (a provider refusing eth_getLogs, before LogsRefusedError was waited out) held every relayer's
    // rebroadcasts, replacements and hole fills, pass after pass, until the worker exited as stuck.
    const parts = new PartFailures();
    const settled = await parts.run(() => settle(ctx, this.state, consumed), 0);
    await parts.run(() => watch(ctx, this.state, unconsumed, nonces), undefined);
    if (options.checkHoles) {
      const clear = await parts.run(() => fillHoles(ctx, this.state, relayers, nonces, groups), false);
      this.quietRelayers = clear && rows.length === 0 ? [...relayers].sort().join(",") : undefined;
    }

    // Forget throttling state of hashes no longer open, and patience timers of groups another worker settled (after
    // a lease moved) or holes it filled: bounded, as every map of ConfirmState. A timer cleared only waits again.
    const { lastSent, shallow, droppedByReorgAt, unsearchedSince, unexplainedSince, noReceiptSince, holeSince } = this.state;
    for (const kept of [lastSent, shallow, droppedByReorgAt, unsearchedSince, unexplainedSince, noReceiptSince, holeSince]) {
      if (kept.size > 20_000) kept.clear();
    }
    ctx.status.inFlight = groups.size - settled;
    parts.rethrow();
    return { open: groups.size - settled, settled };
  }
}
