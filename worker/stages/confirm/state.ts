import type { Address, Hex } from "viem";
import type { OpenNonceTransaction } from "@/db/queries/nonce-groups";
import { isOutage } from "../../errors";
import type { StoredTransaction } from "../broadcast";

/** What the confirm stage's parts share: the nonce groups and this process's memory of them. */

/** Everything stored at one (relayer, nonce): an attempt, its same-nonce replacements, a fill. */
export type Group = { relayer: Address; nonce: number; rows: OpenNonceTransaction[] };

/** How long a consumed nonce without a receipt for any of our hashes (or a hole) is watched before it is acted on. */
export const SUSPECT_CONFIRM_MS = 1_000;
/** The default of WorkerSettings.replayPatienceMs (worker/context.ts). */
export const REPLAY_PATIENCE_MS = 60_000;

export function key(relayer: string, nonce: number): string {
  return `${relayer}:${nonce}`;
}

export function isOpen(row: OpenNonceTransaction): boolean {
  return row.status === "queued" || row.status === "submitted";
}

export function toStored(row: OpenNonceTransaction, raw: Hex): StoredTransaction {
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

export class ConfirmState {
  /** When each hash was last (re)broadcast by this process. */
  readonly lastSent = new Map<string, number>();
  /** Groups whose nonce was consumed without a receipt for any of our hashes: first seen at. */
  readonly noReceiptSince = new Map<string, number>();
  /** Nonces assigned but held by nothing: first seen at. */
  readonly holeSince = new Map<string, number>();
  /** Groups mined but not CONFIRMATIONS deep yet. */
  readonly shallow = new Set<string>();
  /** Reverted groups whose replay the node has not answered: since when (WorkerSettings.replayPatienceMs). */
  readonly unexplainedSince = new Map<string, number>();
  /**
   * Groups whose check against the treasury's Sponsored events every endpoint refused (LogsRefusedError): since
   * when. Decided without the events once WorkerSettings.replayPatienceMs has passed (settle.ts, sponsoredEvents).
   */
  readonly unsearchedSince = new Map<string, number>();
  /** Groups a reorg dropped after they were seen mined: when. Their stuck clock restarts there. */
  readonly droppedByReorgAt = new Map<string, number>();
  /** The block through which settling may look (CONFIRMATIONS - 1 below the head); undefined when that is the head. */
  settledAt: bigint | undefined;
  /** When a stuck transaction not replaced for the fee ceiling was last logged. */
  lastNotReplacedLog = Number.NEGATIVE_INFINITY;

  /** Remembers a broadcast, so it is not repeated at once. */
  noteSent(hashes: readonly string[]): void {
    const now = performance.now();
    for (const h of hashes) this.lastSent.set(h, now);
  }

  noteSettled(row: OpenNonceTransaction): void {
    this.noReceiptSince.delete(key(row.relayerAddress, row.nonce));
  }
}

/**
 * Runs the confirm stage's independent parts (settle, watch, holes; each group's settlement) so that one part's
 * failure does not hold the others: an outage (chain or database not reached) is thrown at once, as the next part
 * would meet it too; any other error (a refusal, one group's bad data) is kept, the remaining parts run, and the
 * first such error is thrown by `rethrow` at the end, so the loop still logs and counts it.
 */
export class PartFailures {
  private first: { error: unknown } | undefined;

  async run<T>(part: () => Promise<T>, fallback: T): Promise<T> {
    try {
      return await part();
    } catch (error) {
      if (isOutage(error)) throw error;
      this.first ??= { error };
      return fallback;
    }
  }

  rethrow(): void {
    if (this.first) throw this.first.error;
  }
}
