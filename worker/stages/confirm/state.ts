import type { Address, Hex } from "viem";
import type { OpenNonceTransaction } from "@/db/queries/nonce-groups";
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
