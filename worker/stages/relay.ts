import type { Address } from "viem";
import {
  countOpenRelays,
  failRequest,
  insertRelayAttempts,
  lockRelayCandidates,
  markRequestsRelayed,
  pauseState,
  readRelayCandidates,
  relayRulesAtCommit,
  type NewRelayAttempt,
  type PauseState,
} from "@/db/queries/relay-queue";
import type { RequestTimes } from "@/db/queries/request-times";
import { pipelinedTransaction } from "@/db/sql/transaction";
import { lockLeasedRelayers, setRelayerNextNonces } from "@/db/queries/relayers";
import { withinTransactionWait } from "../chain";
import { broadcastStored, type StoredTransaction } from "./broadcast";
import { relayChainState, treasuryStatus, type WorkerContext } from "../context";
import { metrics } from "../metrics";
import { LeaseLostError } from "../relayers";
import { signAttempt, storedAttempt } from "./attempts";

export type RelayOutcome = {
  sent: number;
  /** Why nothing was sent although work may be waiting. */
  waiting?:
    "no_relayers" | "relayers_not_authorised" | "sponsorships_paused" | "treasury_paused" | "treasury_underfunded" | "treasury_capacity" | "fees_above_ceiling";
  claimed: number;
  /** Attempts stored (and handed to the chain) by this batch. */
  stored?: number;
};

/**
 * Relay (decisions.md "Pipeline"): for approved requests (first attempt) and relayed requests whose attempts all
 * failed (next attempt), in one transaction: lock this worker's leased relayer rows (the fence: a lease taken
 * over makes the row vanish from the lock), claim requests with SKIP LOCKED, sign each `sponsor` call locally with
 * an explicit nonce, store hash, nonce, fees and raw transaction (status queued), move approved -> relayed and
 * advance the nonces. Then broadcast everything at once, without waiting for any receipt.
 *
 * The administrator's pause is read with the locks: while it is set no relay transaction is signed or sent
 * (approved requests wait; attempts already sent are still confirmed or replaced by the confirm stage). It and the
 * administrator's wallet blocks are read again with the writes, under locks held to the commit (relayRulesAtCommit):
 * a pause or a block answered while the chain was being asked withdraws the batch.
 * The treasury is checked first: paused, or not enough balance for the amounts already in flight plus one more,
 * leaves requests where they are (no attempt is created, none is burned) and health shows it. So does a base fee
 * above MAX_FEE_PER_GAS_GWEI (worker/fee-ceiling.ts); otherwise the fees offered are capped at the ceiling.
 *
 * Four round trips to the database: BEGIN with both locks (relayers, then requests); the re-read of the locked
 * requests with the count of open relays (while the treasury and the fees are read from the chain, for at most
 * CHAIN_WAIT_IN_TRANSACTION_MS: worker/chain.ts); the writes; COMMIT once the nonce update is known to have found
 * every relayer.
 */
/** The set of leased relayers last found not authorised, per worker: logged when it changes. */
const loggedUnauthorised = new WeakMap<WorkerContext, string[]>();

/**
 * Tells the operator when some leased relayers are not authorised by the treasury: their share of the relays goes
 * through the others, silently otherwise (/health is degraded only when requests wait for want of any, decisions.md).
 * Once per change of that set, and once when it empties again.
 */
function noteUnauthorised(ctx: WorkerContext, relayers: string[]): void {
  const sorted = [...relayers].sort();
  const before = loggedUnauthorised.get(ctx) ?? [];
  if (sorted.join(",") === before.join(",")) return;
  loggedUnauthorised.set(ctx, sorted);
  if (sorted.length > 0) {
    ctx.log.warn("relayers not authorised by the treasury: relays go through the others (with none left, requests wait approved)", {
      relayers: sorted,
      leased: ctx.pool.leased.length,
    });
  } else {
    ctx.log.info("every leased relayer is authorised by the treasury again", { before });
  }
}

/** Thrown inside the relay's transaction to roll its batch back: paused or a wallet blocked while the chain was asked. */
class BatchWithdrawn extends Error {
  constructor(
    readonly pause: PauseState,
    readonly blocked: number,
    readonly claimed: number,
  ) {
    super("relay batch withdrawn before commit");
  }
}

export async function relayBatch(ctx: WorkerContext): Promise<RelayOutcome> {
  try {
    return await relayBatchOnce(ctx);
  } catch (error) {
    if (!(error instanceof BatchWithdrawn)) throw error;
    ctx.status.pause = error.pause.paused ? { reason: error.pause.reason } : undefined;
    ctx.log.info("relay batch withdrawn before commit: nothing stored or sent", {
      paused: error.pause.paused,
      walletsBlocked: error.blocked,
      claimed: error.claimed,
    });
    return { sent: 0, claimed: error.claimed, ...(error.pause.paused ? { waiting: "sponsorships_paused" as const } : {}) };
  }
}

/**
 * Seen without gas money recently: its queued attempts are refused again at every broadcast (every few seconds), so
 * a mark that has not been renewed for a minute is stale (its last refused transaction settled another way): the
 * relayer gets attempts again, and is marked again if they are refused.
 */
const WITHOUT_GAS_FRESH_MS = 60_000;
function withoutGasNow(ctx: WorkerContext, relayer: string): boolean {
  const seen = ctx.status.relayerGas.get(relayer);
  return seen?.withoutGas === true && performance.now() - seen.seenAtMs < WITHOUT_GAS_FRESH_MS;
}

async function relayBatchOnce(ctx: WorkerContext): Promise<RelayOutcome> {
  const relayers = ctx.pool.leased;
  if (relayers.length === 0) return { sent: 0, claimed: 0, waiting: "no_relayers" };
  const max = ctx.settings.maxRelayAttempts;

  const failedHere: (RequestTimes | undefined)[] = [];
  const result = await pipelinedTransaction(ctx.db, async (tx) => {
    // The relayer rows first (the fence), then the requests (SKIP LOCKED), as one batch.
    const [nonces, locked, pause] = await tx.send([lockLeasedRelayers(ctx.workerId, relayers), lockRelayCandidates(ctx.settings.batchSize), pauseState()]);
    ctx.status.pause = pause.paused ? { reason: pause.reason } : undefined;
    for (const r of relayers) if (!nonces.has(r)) ctx.pool.drop(r, "lease not held at relay time");
    if (pause.paused) return { stored: [], claimed: locked.length, waiting: "sponsorships_paused" as const };
    if (nonces.size === 0) return { stored: [] as StoredTransaction[], claimed: 0 };
    if (locked.length === 0) return { stored: [], claimed: 0 };

    // The locked requests re-read in a later statement (it sees every attempt committed before the locks were
    // granted). The treasury must cover what is already in flight plus each new attempt; otherwise the requests
    // wait (rows untouched, locks released at commit) and no attempt is created or burned. The chain is asked
    // while the database answers, once per block (relayChainState), for CHAIN_WAIT_IN_TRANSACTION_MS at most: past
    // it the batch is rolled back as a chain outage, long before the server would end the transaction.
    const [[candidates, openRelays], { treasury, fees, authorised }] = await Promise.all([
      tx.send([readRelayCandidates(locked), countOpenRelays()]),
      withinTransactionWait("relay", relayChainState(ctx, [...nonces.keys()] as Address[])),
    ]);
    if (candidates.length === 0) return { stored: [], claimed: 0 };
    ctx.status.treasury = treasuryStatus(treasury);
    const { underfunded } = ctx.status.treasury;
    if (treasury.paused) return { stored: [], claimed: candidates.length, waiting: "treasury_paused" as const };
    const affordable = treasury.amount > 0n ? treasury.balance / treasury.amount - BigInt(openRelays) : BigInt(candidates.length);
    if (affordable <= 0n) {
      return { stored: [], claimed: candidates.length, waiting: underfunded ? ("treasury_underfunded" as const) : ("treasury_capacity" as const) };
    }
    // The network asks more than the ceiling: nothing signed under it could be mined. Requests wait as they are.
    if (fees.aboveCeiling) return { stored: [], claimed: candidates.length, waiting: "fees_above_ceiling" as const };

    // A relayer the treasury does not authorise would only send reverts: it is left out, and with none left the
    // requests wait (no attempt burned) until the owner authorises one.
    const isAuthorised = (r: Address) => authorised.has(r.toLowerCase() as Address);
    const rotation = ctx.pool.rotation().filter((r) => nonces.has(r) && isAuthorised(r));
    noteUnauthorised(
      ctx,
      [...nonces.keys()].filter((r) => !isAuthorised(r)),
    );
    if (rotation.length === 0) return { stored: [], claimed: candidates.length, waiting: "relayers_not_authorised" as const };
    // A relayer last seen without gas money (its broadcasts refused for want of funds) would only add attempts that
    // wait for its funding while a funded one idles: it is left out while another can send. Its queued attempts are
    // still broadcast again (confirm stage), and the first one accepted puts it back. All without gas: all are
    // used, and the attempts wait for whichever is funded first (the heartbeat and /health name them).
    const funded = rotation.filter((r) => !withoutGasNow(ctx, r));
    const sending = funded.length > 0 ? funded : rotation;
    const attempts: NewRelayAttempt[] = [];
    const firstAttempts: string[] = [];
    let next = 0;
    for (const c of candidates) {
      if (BigInt(attempts.length) >= affordable) break;
      if (c.burned >= max) {
        // The confirm stage fails a request at its last attempt, the broadcast at its last refusal (failUsedUpRequests);
        // this is reached when MAX_RELAY_ATTEMPTS was lowered, or when one of those writes failed. Counted once the
        // batch has committed (a withdrawn batch rolls the failure back).
        failedHere.push(...(await tx.send([failRequest(c.id, ctx.actor, `relay failed: all ${c.burned} attempts failed`)])));
        continue;
      }
      const relayer = sending[next++ % sending.length]! as Address;
      const nonce = nonces.get(relayer)!;
      nonces.set(relayer, nonce + 1);
      attempts.push(await signAttempt(ctx, { requestId: c.id, attempt: c.attempts + 1, wallet: c.walletAddress, relayer, nonce, fees }));
      if (c.status === "approved") firstAttempts.push(c.id);
    }
    if (attempts.length === 0) return { stored: [], claimed: candidates.length };

    const used = new Map([...nonces].filter(([address]) => attempts.some((a) => a.relayerAddress === address)));
    const wallets = new Map(candidates.map((c) => [c.id, c.walletAddress]));
    // The pause and the administrator's wallet blocks looked at again, under locks held to the commit
    // (relayRulesAtCommit): one set while the chain was asked withdraws the whole batch (rolled back, nothing sent).
    const [, pauseNow, blocked, ids, , updated] = await tx.send([
      ...relayRulesAtCommit(attempts.map((a) => ({ requestId: a.sponsorshipRequestId, walletAddress: wallets.get(a.sponsorshipRequestId)! }))),
      insertRelayAttempts(attempts),
      markRequestsRelayed(firstAttempts, ctx.actor, "relay transaction signed, stored and handed to the chain"),
      setRelayerNextNonces(ctx.workerId, used),
    ]);
    if (pauseNow.paused || blocked.length > 0) throw new BatchWithdrawn(pauseNow, blocked.length, candidates.length);
    if (updated !== used.size) throw new LeaseLostError("a relayer lease was lost during the relay batch");
    await tx.commit();
    return {
      claimed: candidates.length,
      stored: attempts.map((a) => storedAttempt(a, ids.get(a.transactionHash)!)),
    };
  });

  if (failedHere.length > 0) {
    metrics.finished(failedHere);
    ctx.status.totals.failed += failedHere.filter((r) => r !== undefined).length;
  }
  const waiting = "waiting" in result ? result.waiting : undefined;
  if (result.stored.length === 0) return { sent: 0, claimed: result.claimed, waiting };
  ctx.status.totals.attempts += result.stored.length;
  // In flight until the confirm stage counts them again (it polls while anything is in flight).
  ctx.status.inFlight += result.stored.length;
  for (const s of result.stored) metrics.attempt(s.relayer, s.attempt ?? 1);
  ctx.log.debug("relay attempts stored", { count: result.stored.length });
  const summary = await broadcastStored(ctx, result.stored, "first");
  return { sent: summary.accepted, claimed: result.claimed, stored: result.stored.length };
}
