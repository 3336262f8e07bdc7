import type { Hash, Hex } from "viem";
import {
  completeRequests,
  completeRequestsOfConfirmedStatement,
  confirmNonceFill,
  countOpenAttempts,
  confirmRelays,
  confirmRelaysStatements,
  failNonceFills,
  failNonceFillsStatement,
  failRelays,
  failRelaysStatement,
  failRequest,
  findRelayByHash,
  insertNonceFill,
  insertRelayAttempts,
  listOpenNonceGroups,
  lockIfOpen,
  lockRequest,
  readRawTransactions,
  SERVICE_STATE_FAILURE,
  type MinedRelay,
  type OpenNonceTransaction,
  type RelayFailure,
} from "@/db/queries/pipeline";
import { pipelinedTransaction, type Statement } from "@/db/sql/pipelined";
import { listRelayerLeases, lockLeasedRelayers, setRelayerNextNonces } from "@/db/queries/relayers";
import type { Transaction } from "@/db/sql/executor";
import { broadcastStored, type StoredTransaction } from "./broadcast";
import type { MinedReceipt, RelayerNonces } from "./chain";
import { currentFees, type WorkerContext } from "./context";
import { withinCeiling } from "./fee-ceiling";
import { metrics } from "./metrics";
import { LeaseLostError } from "./relayers";
import { SERVICE_STATE_REVERTS, WALLET_REFUSED_REVERT } from "./review";
import { SPONSOR_GAS_LIMIT, bumpFees, signFillTransaction, signSponsorTransaction } from "./transactions";

/**
 * Confirm (decisions.md "Pipeline"): settles every stored transaction of this worker's relayers, nonce by nonce.
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
 * - no receipt for any of our hashes (seen twice): the nonce was used elsewhere, the attempts are dropped.
 * Groups not settled yet are watched: a stored transaction the node does not hold (queued after a crash or an
 * outage, or lost: pending nonce below it) is broadcast again from its stored bytes; one unmined for
 * RELAY_TIMEOUT_MS (counted only while the chain was reachable) is replaced at the same nonce with fees >= +12.5%
 * as the request's next attempt, or, after the last attempt, cancelled by a fill so the request can fail for good.
 * A replaced transaction stays open until its nonce is settled (it may still be the one mined: then it completes its
 * request); a replacement refused for good fails alone, and the newest open transaction is watched again (replaced
 * a timeout later, outbidding everything stored at the nonce). A nonce the database assigned but nothing holds any
 * more (a hole that would block every later nonce) is filled.
 */

type Address = `0x${string}`;

const REBROADCAST_EVERY_MS = 3_000;
const SUSPECT_CONFIRM_MS = 1_000;

type Group = { relayer: Address; nonce: number; rows: OpenNonceTransaction[] };

function key(relayer: string, nonce: number): string {
  return `${relayer}:${nonce}`;
}

function isOpen(row: OpenNonceTransaction): boolean {
  return row.status === "queued" || row.status === "submitted";
}

function toStored(row: OpenNonceTransaction, raw: Hex): StoredTransaction {
  return {
    kind: row.kind,
    id: row.id,
    hash: row.transactionHash,
    raw,
    requestId: row.sponsorshipRequestId,
    relayer: row.relayerAddress,
    nonce: row.nonce,
  };
}

export type ConfirmOutcome = { open: number; settled: number };

export class Confirmer {
  /** When each hash was last (re)broadcast by this process. */
  private readonly lastSent = new Map<string, number>();
  /** Groups whose nonce was consumed without a receipt for any of our hashes: first seen at. */
  private readonly noReceiptSince = new Map<string, number>();
  /** Nonces assigned but held by nothing: first seen at. */
  private readonly holeSince = new Map<string, number>();
  /** Groups mined but not CONFIRMATIONS deep yet. */
  private readonly shallow = new Set<string>();
  /** Groups a reorg dropped after they were seen mined: when. Their stuck clock restarts there. */
  private readonly droppedByReorgAt = new Map<string, number>();
  /** The block through which settling may look (CONFIRMATIONS - 1 below the head); undefined when that is the head. */
  private settledAt: bigint | undefined;
  /**
   * The relayers whose last full check (with holes) found nothing open, no hole and no nonce used outside the
   * service: until something is stored for them, there is nothing to watch (the loop then checks rarely).
   */
  private quietRelayers: string | undefined;

  /** True when the last full check found these very relayers quiet and nothing was seen open since. */
  isQuiet(relayers: readonly string[]): boolean {
    return this.quietRelayers !== undefined && this.quietRelayers === [...relayers].sort().join(",");
  }

  constructor(private readonly ctx: WorkerContext) {}

  /** Remembers a broadcast made elsewhere (relay stage), so it is not repeated at once. */
  noteSent(hashes: readonly string[]): void {
    const now = Date.now();
    for (const h of hashes) this.lastSent.set(h, now);
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
      this.settledAt = head >= depth - 1n ? head - (depth - 1n) : 0n;
    } else {
      this.settledAt = undefined;
    }
    // Both reads together: no other stage of this worker runs meanwhile, and no other worker touches these relayers.
    const [rows, nonces] = await Promise.all([listOpenNonceGroups(ctx.db, relayers), ctx.chain.nonces(relayers, this.settledAt)]);
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
    const now = Date.now();
    for (const g of groups.values()) {
      const n = nonces.get(g.relayer);
      if (!n) continue;
      const k = key(g.relayer, g.nonce);
      if (g.nonce < n.settled) {
        consumed.push(g);
        this.shallow.delete(k);
        this.droppedByReorgAt.delete(k);
      } else if (g.nonce < n.latest) {
        this.shallow.add(k);
      } else {
        if (this.shallow.delete(k)) {
          this.droppedByReorgAt.set(k, now);
          ctx.log.warn("mined transaction dropped by a reorg before it was deep enough: watched again", { relayer: g.relayer, nonce: g.nonce });
        }
        unconsumed.push(g);
      }
    }

    const settled = await this.settle(consumed);
    await this.watch(unconsumed, nonces);
    if (options.checkHoles) {
      const clear = await this.fillHoles(relayers, nonces, groups);
      this.quietRelayers = clear && rows.length === 0 ? [...relayers].sort().join(",") : undefined;
    }

    // Forget throttling state of hashes no longer open.
    if (this.lastSent.size > 20_000) this.lastSent.clear();
    if (this.shallow.size > 20_000) this.shallow.clear();
    if (this.droppedByReorgAt.size > 20_000) this.droppedByReorgAt.clear();
    ctx.status.inFlight = groups.size - settled;
    return { open: groups.size - settled, settled };
  }

  /* ------------------------------------------------------------ settling */

  private async settle(consumed: Group[]): Promise<number> {
    if (consumed.length === 0) return 0;
    const { ctx } = this;
    const receipts = await ctx.chain.receipts(consumed.flatMap((g) => g.rows.map((r) => r.transactionHash)));
    const successes: { group: Group; winner: OpenNonceTransaction; receipt: MinedReceipt }[] = [];
    const reverts: { group: Group; winner: OpenNonceTransaction; receipt: MinedReceipt }[] = [];
    const fills: { group: Group; winner: OpenNonceTransaction; receipt: MinedReceipt }[] = [];
    const dropped: Group[] = [];
    const now = Date.now();
    for (const group of consumed) {
      const k = key(group.relayer, group.nonce);
      const winner = group.rows.find((r) => receipts.get(r.transactionHash));
      if (!winner) {
        const since = this.noReceiptSince.get(k);
        if (since === undefined) this.noReceiptSince.set(k, now);
        else if (now - since >= SUSPECT_CONFIRM_MS) dropped.push(group);
        continue;
      }
      this.noReceiptSince.delete(k);
      const receipt = receipts.get(winner.transactionHash)!;
      if (winner.kind === "fill") fills.push({ group, winner, receipt });
      else if (receipt.status === "success") successes.push({ group, winner, receipt });
      else reverts.push({ group, winner, receipt });
    }

    let settled = 0;
    if (successes.length > 0) settled += await this.settleSuccesses(successes);
    for (const r of reverts) settled += await this.settleRevert(r.group, r.winner, r.receipt);
    for (const f of fills) settled += await this.settleFill(f.group, f.winner, f.receipt);
    if (dropped.length > 0) settled += await this.settleDropped(dropped);
    return settled;
  }

  private async settleSuccesses(items: { group: Group; winner: OpenNonceTransaction; receipt: MinedReceipt }[]): Promise<number> {
    const { ctx } = this;
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
      const writes: Statement[] = [...confirmRelaysStatements(mined)];
      if (losers.length > 0) writes.push(failRelaysStatement(losers));
      if (loserFills.length > 0) writes.push(failNonceFillsStatement(loserFills));
      const complete = completeRequestsOfConfirmedStatement(
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
      this.noteSettled(winner);
    }
    return items.length;
  }

  private noteSettled(row: OpenNonceTransaction): void {
    this.noReceiptSince.delete(key(row.relayerAddress, row.nonce));
  }

  /** Closes the attempts of a group that were not mined, and fails their requests that have no attempt left. */
  private async closeGroup(
    tx: Transaction,
    group: Group,
    winnerId: string | undefined,
    reason: string,
    requestFailure: (attempts: number) => string | undefined,
  ): Promise<void> {
    const { ctx } = this;
    const requestIds = [...new Set(group.rows.filter((r) => r.kind === "relay" && isOpen(r)).map((r) => r.sponsorshipRequestId!))];
    const winner = group.rows.find((r) => r.id === winnerId);
    if (winner?.kind === "relay" && winner.sponsorshipRequestId && !requestIds.includes(winner.sponsorshipRequestId)) {
      requestIds.push(winner.sponsorshipRequestId);
    }
    for (const requestId of requestIds.sort()) {
      const req = await lockRequest(tx, requestId);
      await failRelays(
        tx,
        group.rows.filter((r) => r.kind === "relay" && r.sponsorshipRequestId === requestId && r.id !== winnerId && isOpen(r)).map((r) => ({ id: r.id, reason })),
      );
      if (req?.status !== "relayed") continue;
      // Another attempt still open (at another nonce: made by a worker that took the relayer over while this one
      // was paused on what it had read) could still be mined: only its own settlement may fail the request.
      if ((await countOpenAttempts(tx, requestId)) > 0) continue;
      const failure = requestFailure(req.attempts);
      const failed = failure ? await failRequest(tx, requestId, ctx.actor, failure) : undefined;
      if (failed) {
        metrics.finished([failed]);
        ctx.status.totals.failed++;
        ctx.log.warn("request failed", { requestId, attempts: req.attempts, reason: failure });
      }
    }
    await failNonceFills(
      tx,
      group.rows.filter((r) => r.kind === "fill" && r.id !== winnerId && isOpen(r)).map((r) => ({ id: r.id, reason })),
    );
  }

  private async settleRevert(group: Group, winner: OpenNonceTransaction, receipt: MinedReceipt): Promise<number> {
    const { ctx } = this;
    const requestId = winner.sponsorshipRequestId!;
    const explained = await ctx.chain.explainSponsorRevert(winner.relayerAddress, winner.walletAddress!, requestId);
    const reason = `${explained.text} (block ${receipt.blockNumber})`;

    // AlreadySponsored: did one of this request's own transactions pay it (a hash we sent at another nonce)?
    if (explained.errorName === "AlreadySponsored") {
      const events = await ctx.chain.findSponsoredEvents([requestId], { throughBlock: this.settledAt });
      const event = events.get(requestId);
      const ours = event ? await findRelayByHash(ctx.db, event.transactionHash) : undefined;
      if (event && ours) {
        const [paid] = (await ctx.chain.receipts([event.transactionHash])).values();
        await ctx.db.transaction(async (tx) => {
          await lockRequest(tx, requestId);
          await failRelays(tx, [{ id: winner.id, reason }]);
          await this.closeGroup(tx, group, winner.id, `superseded: attempt ${winner.relayAttempt} at nonce ${group.nonce} was mined and reverted`, () => undefined);
          const ids = await confirmRelays(tx, [{ id: ours.id, blockNumber: event.blockNumber, gasUsed: paid?.gasUsed ?? 0n }]);
          metrics.finished(await completeRequests(tx, ids, ctx.actor, `relay transaction ${event.transactionHash} mined and confirmed`));
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
    await ctx.db.transaction(async (tx) => {
      await lockRequest(tx, requestId);
      await failRelays(tx, [{ id: winner.id, reason: relayReason }]);
      await this.closeGroup(tx, group, winner.id, `superseded: attempt ${winner.relayAttempt} at nonce ${group.nonce} was mined and reverted`, (attempts) => {
        if (serviceState) return undefined;
        if (explained.errorName === "AlreadySponsored") return "relay failed: the wallet was already sponsored on-chain by another transaction";
        // A revert of the wallet's own making (it refused the transfer): no retry can cure it, so the request fails
        // at once (decisions.md, "Wallets that cannot be paid").
        if (explained.errorName === WALLET_REFUSED_REVERT) {
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
    this.noteSettled(winner);
    return 1;
  }

  private async settleFill(group: Group, winner: OpenNonceTransaction, receipt: MinedReceipt): Promise<number> {
    const { ctx } = this;
    const reason = `cancelled: nonce ${group.nonce} was filled by ${winner.transactionHash} (block ${receipt.blockNumber})`;
    await ctx.db.transaction(async (tx) => {
      await this.closeGroup(tx, group, winner.id, reason, (attempts) =>
        attempts >= ctx.settings.maxRelayAttempts ? `relay failed after ${attempts} attempts: none was mined within the relay timeout; the last was cancelled` : undefined,
      );
      await confirmNonceFill(tx, winner.id, receipt.blockNumber);
    });
    ctx.log.info("nonce fill mined", { relayer: group.relayer, nonce: group.nonce, hash: winner.transactionHash, requestId: winner.sponsorshipRequestId });
    this.noteSettled(winner);
    return 1;
  }

  private async settleDropped(groups: Group[]): Promise<number> {
    const { ctx } = this;
    const requestIds = [...new Set(groups.flatMap((g) => g.rows.filter((r) => r.kind === "relay").map((r) => r.sponsorshipRequestId!)))];
    const events = await ctx.chain.findSponsoredEvents(requestIds, { throughBlock: this.settledAt });
    let settled = 0;
    for (const group of groups) {
      // The chain's own record first: a Sponsored event naming one of this group's hashes means it was mined.
      const paidBy = group.rows.find((r) => r.kind === "relay" && events.get(r.sponsorshipRequestId!)?.transactionHash.toLowerCase() === r.transactionHash);
      if (paidBy) {
        const event = events.get(paidBy.sponsorshipRequestId!)!;
        await this.settleSuccesses([{ group, winner: paidBy, receipt: { status: "success", blockNumber: event.blockNumber, gasUsed: 0n } }]);
        settled++;
        continue;
      }
      const reason = `dropped: nonce ${group.nonce} of ${group.relayer} was used by a transaction this service did not send`;
      await ctx.db.transaction(async (tx) => {
        await this.closeGroup(tx, group, undefined, reason, (attempts) =>
          attempts >= ctx.settings.maxRelayAttempts ? `relay failed after ${attempts} attempts; last: ${reason}` : undefined,
        );
      });
      ctx.status.totals.failedAttempts++;
      metrics.failure(group.relayer, "dropped");
      ctx.log.warn("relay attempt dropped", { relayer: group.relayer, nonce: group.nonce, hashes: group.rows.map((r) => r.transactionHash) });
      this.noReceiptSince.delete(key(group.relayer, group.nonce));
      settled++;
    }
    return settled;
  }

  /* ------------------------------------------------------------ watching */

  private async watch(groups: Group[], nonces: Map<Address, RelayerNonces>): Promise<void> {
    const { ctx } = this;
    const now = Date.now();
    const resend: OpenNonceTransaction[] = [];
    const stuck: Group[] = [];
    const reachableFor = ctx.chain.health.reachableForMs();
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
      if (notHeld && now - (this.lastSent.get(latestOpen.transactionHash) ?? 0) >= REBROADCAST_EVERY_MS) resend.push(latestOpen);
      if (latestOpen.status === "submitted" && latestOpen.submittedAgeMs !== null) {
        // Time spent mined (waiting to be deep enough) is not time unmined: after a reorg the clock starts again.
        const droppedAt = this.droppedByReorgAt.get(key(group.relayer, group.nonce));
        // A replacement the node refused (stored after it, now closed) restarts the clock too: one try per timeout.
        const newest = group.rows[group.rows.length - 1]!;
        const sinceReplacement = newest.id === latestOpen.id ? Number.POSITIVE_INFINITY : newest.createdAgeMs;
        const age = Math.min(latestOpen.submittedAgeMs, reachableFor, droppedAt === undefined ? Number.POSITIVE_INFINITY : now - droppedAt, sinceReplacement);
        if (age >= ctx.settings.relayTimeoutMs) stuck.push(group);
      }
    }
    if (resend.length > 0) {
      const raws = await readRawTransactions(ctx.db, resend.map((r) => r.transactionHash));
      const summary = await broadcastStored(
        ctx,
        resend.filter((r) => raws.has(r.transactionHash)).map((r) => toStored(r, raws.get(r.transactionHash)!)),
        "again",
      );
      this.noteSent(resend.map((r) => r.transactionHash));
      if (summary.accepted > 0) ctx.log.info("stored transactions broadcast again", { count: summary.accepted, nonces: resend.slice(0, 20).map((r) => `${r.relayerAddress}:${r.nonce}`) });
    }
    for (const group of stuck.slice(0, ctx.settings.batchSize)) await this.unstick(group);
  }

  /** A group unmined for RELAY_TIMEOUT_MS: the next attempt at the same nonce with higher fees, or a cancelling fill. */
  private async unstick(group: Group): Promise<void> {
    const { ctx } = this;
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
      this.noteNotReplaced(group, fees.maxFeePerGas, ceiling!);
      return;
    }
    const timeout = ctx.settings.relayTimeoutMs;
    const account = ctx.pool.account(group.relayer);

    const stored = await ctx.db.transaction(async (tx): Promise<StoredTransaction | undefined> => {
      const fence = await lockLeasedRelayers(tx, ctx.workerId, [group.relayer]);
      if (!fence.has(group.relayer)) throw new LeaseLostError(`lease of ${group.relayer} lost before replacing nonce ${group.nonce}`);
      // Settled meanwhile (another pass, a takeover): nothing to replace.
      if (!(await lockIfOpen(tx, current.kind, current.id))) return undefined;

      if (current.kind === "relay") {
        const requestId = current.sponsorshipRequestId!;
        const req = await lockRequest(tx, requestId);
        // The request's latest attempt is at this nonce (a refused replacement counts: it used its number).
        const latestHere = Math.max(...group.rows.filter((r) => r.kind === "relay" && r.sponsorshipRequestId === requestId).map((r) => r.relayAttempt ?? 0));
        if (req?.status === "relayed" && req.attempts < ctx.settings.maxRelayAttempts && req.attempts === latestHere) {
          const attempt = req.attempts + 1;
          const signed = await signSponsorTransaction(account, {
            chainId: ctx.chain.chainId,
            treasury: ctx.chain.treasuryAddress,
            nonce: group.nonce,
            fees,
            wallet: current.walletAddress!,
            requestId,
          });
          const ids = await insertRelayAttempts(tx, [
            {
              sponsorshipRequestId: requestId,
              relayAttempt: attempt,
              relayerAddress: group.relayer,
              nonce: group.nonce,
              transactionHash: signed.hash,
              rawTransaction: signed.raw,
              maxFeePerGas: fees.maxFeePerGas,
              maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
              gasLimit: SPONSOR_GAS_LIMIT,
            },
          ]);
          ctx.status.totals.replacements++;
          // "timeout": an attempt not mined in time was replaced (it stays open: it may still be the one mined).
          metrics.failure(group.relayer, "timeout");
          metrics.attempt(group.relayer, attempt);
          ctx.log.warn("relay attempt stuck: replaced at the same nonce", {
            requestId,
            attempt,
            relayer: group.relayer,
            nonce: group.nonce,
            replaced: current.transactionHash,
            hash: signed.hash,
            maxFeePerGas: fees.maxFeePerGas,
          });
          return { kind: "relay", id: ids.get(signed.hash)!, hash: signed.hash, raw: signed.raw, requestId, relayer: group.relayer, nonce: group.nonce };
        }
      }

      // No attempt left (or the stuck one is itself a fill): cancel the nonce with a zero-value transfer to self. What
      // is open at the nonce stays open until one of them is mined (the others fail as superseded or cancelled then).
      const previousFill = current.kind === "fill" ? current : undefined;
      const requestId = current.sponsorshipRequestId;
      const why = previousFill
        ? previousFill.relayAttempt === null && previousFill.sponsorshipRequestId === null
          ? `fill of nonce ${group.nonce}, fees raised`
          : `cancel of nonce ${group.nonce} for request ${requestId}, fees raised`
        : `cancel: attempt ${current.relayAttempt} of request ${requestId} not mined within ${timeout} ms and no attempt left`;
      const signed = await signFillTransaction(account, { chainId: ctx.chain.chainId, nonce: group.nonce, fees });
      const id = await insertNonceFill(tx, {
        relayerAddress: group.relayer,
        nonce: group.nonce,
        sponsorshipRequestId: requestId,
        reason: why,
        transactionHash: signed.hash,
        rawTransaction: signed.raw,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
      ctx.status.totals.fills++;
      ctx.log.warn("nonce cancelled by a fill", { relayer: group.relayer, nonce: group.nonce, requestId, hash: signed.hash, why });
      return { kind: "fill", id, hash: signed.hash, raw: signed.raw, requestId, relayer: group.relayer, nonce: group.nonce };
    });
    if (stored) {
      await broadcastStored(ctx, [stored], "first");
      this.noteSent([stored.hash]);
    }
  }

  private lastNotReplacedLog = 0;
  /** A stuck transaction whose replacement would have to be signed above the fee ceiling (logged every 30 s). */
  private noteNotReplaced(group: Group, wouldBe: bigint, ceiling: bigint): void {
    const now = Date.now();
    if (now - this.lastNotReplacedLog < 30_000) return;
    this.lastNotReplacedLog = now;
    this.ctx.log.warn("stuck transaction not replaced: the replacement would exceed MAX_FEE_PER_GAS_GWEI", {
      relayer: group.relayer,
      nonce: group.nonce,
      replacementMaxFeePerGas: wouldBe,
      ceilingWei: ceiling,
    });
  }

  /* --------------------------------------------------------------- holes */

  /**
   * A nonce below the relayer's next nonce that the node does not hold and nothing stored is open for (its
   * transaction was refused, or the node lost it and nothing was stored): every later nonce waits behind it.
   * Seen twice a second apart, it is filled.
   */
  /** True when every relayer's next nonce is exactly the chain's pending nonce (no hole, nothing used outside). */
  private async fillHoles(relayers: Address[], nonces: Map<Address, RelayerNonces>, groups: Map<string, Group>): Promise<boolean> {
    const { ctx } = this;
    const leases = await listRelayerLeases(ctx.db, relayers);
    const now = Date.now();
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
        await ctx.db.transaction(async (tx) => {
          const fence = await lockLeasedRelayers(tx, ctx.workerId, [lease.address]);
          const current = fence.get(lease.address);
          if (current !== undefined && current < n.pending) await setRelayerNextNonces(tx, ctx.workerId, new Map([[lease.address, n.pending]]));
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
        for (const h of this.holeSince.keys()) if (h.startsWith(`${lease.address}:`)) this.holeSince.delete(h);
        continue;
      }
      const since = this.holeSince.get(k);
      if (since === undefined) {
        this.holeSince.set(k, now);
        continue;
      }
      if (now - since < SUSPECT_CONFIRM_MS) continue;
      this.holeSince.delete(k);
      const fees = await currentFees(ctx);
      // Above the fee ceiling a fill could not be mined either: it is filled once fees fall.
      if (fees.aboveCeiling) continue;
      const account = ctx.pool.account(lease.address);
      const stored = await ctx.db.transaction(async (tx): Promise<StoredTransaction> => {
        const fence = await lockLeasedRelayers(tx, ctx.workerId, [lease.address]);
        if (!fence.has(lease.address)) throw new LeaseLostError(`lease of ${lease.address} lost before filling nonce ${hole}`);
        const signed = await signFillTransaction(account, { chainId: ctx.chain.chainId, nonce: hole, fees });
        const id = await insertNonceFill(tx, {
          relayerAddress: lease.address,
          nonce: hole,
          sponsorshipRequestId: null,
          reason: `fill: nonce ${hole} was assigned but the node holds no transaction for it (later nonces were waiting)`,
          transactionHash: signed.hash,
          rawTransaction: signed.raw,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        });
        return { kind: "fill", id, hash: signed.hash as Hash, raw: signed.raw, requestId: null, relayer: lease.address, nonce: hole };
      });
      ctx.status.totals.fills++;
      ctx.log.warn("nonce gap filled", { relayer: lease.address, nonce: hole, nextNonce: lease.nextNonce, hash: stored.hash });
      await broadcastStored(ctx, [stored], "first");
      this.noteSent([stored.hash]);
    }
    return clear;
  }
}
