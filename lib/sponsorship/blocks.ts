import { lockKeys } from "@/db/sql/advisory-locks";
import { findActiveBlocks, hasActiveBlock, insertBlock, liftActiveBlocks, listBlocksOf } from "@/db/queries/blocks";
import type { Executor } from "@/db/sql/run";
import type { Block } from "@/db/schema";
import { normalizeAddress, type Address } from "./address";
import { now as clockNow } from "./clock";
import { SponsorshipError } from "./errors";
import { walletLockKey } from "./lock-keys";

/**
 * Administrator blocks of wallets (decisions.md, "Rate limits and blocks": no expiry until lifted, carry a reason,
 * audited). The audit is the block row itself: who blocked (`createdBy`), when and why; who lifted it, when and why.
 * Automatic blocks (rate limiting) live in the same table with an expiry; see rate-limits.ts.
 *
 * A wallet is blocked while it has an active block: `lifted_at IS NULL AND (expires_at IS NULL OR expires_at > now)`.
 */

const MAX_REASON_LENGTH = 1000;

function addressOrThrow(input: string): Address {
  const address = normalizeAddress(input);
  if (!address) throw new SponsorshipError("invalid_address", "walletAddress must be 0x followed by 40 hex characters");
  return address;
}

function reasonOrThrow(input: string): string {
  const reason = typeof input === "string" ? input.trim() : "";
  // PostgreSQL text cannot hold NUL: refuse it here rather than fail the insert.
  if (reason === "" || reason.length > MAX_REASON_LENGTH || reason.includes("\u0000")) {
    throw new SponsorshipError("invalid_value", `reason must be 1 to ${MAX_REASON_LENGTH} characters, without NUL`);
  }
  return reason;
}

function actorOrThrow(input: string): string {
  const actor = typeof input === "string" ? input.trim() : "";
  if (actor === "") throw new SponsorshipError("invalid_value", "actor must name who acts");
  return actor;
}

export type BlockWalletResult = {
  /** The active administrator block (the new one, or the one that already existed). */
  block: Block;
  /** false when the wallet already had an active administrator block: nothing was written. */
  created: boolean;
};

/**
 * Blocks a wallet until an administrator lifts the block. Idempotent: a wallet already under an administrator block
 * keeps that block. The wallet need not be registered. `actor` names who acted, e.g. `admin:<session id>`.
 */
export async function blockWallet(db: Executor, input: { walletAddress: string; reason: string; actor: string; now?: Date }): Promise<BlockWalletResult> {
  const address = addressOrThrow(input.walletAddress);
  const reason = reasonOrThrow(input.reason);
  const actor = actorOrThrow(input.actor);
  const at = input.now ?? clockNow();
  return db.transaction(async (tx) => {
    await lockKeys(tx, [walletLockKey(address)]);
    const existing = (await findActiveBlocks(tx, "wallet", address, at)).find((b) => b.kind === "admin");
    if (existing) return { block: existing, created: false };
    const block = await insertBlock(tx, {
      subjectType: "wallet",
      subject: address,
      kind: "admin",
      reason,
      createdBy: actor,
      createdAt: at,
      expiresAt: null,
    });
    return { block, created: true };
  });
}

/**
 * Lifts every active block of the wallet, administrator and automatic alike. Returns the lifted blocks (empty when
 * the wallet was not blocked).
 */
export async function unblockWallet(db: Executor, input: { walletAddress: string; reason: string; actor: string; now?: Date }): Promise<{ lifted: Block[] }> {
  const address = addressOrThrow(input.walletAddress);
  const reason = reasonOrThrow(input.reason);
  const actor = actorOrThrow(input.actor);
  const at = input.now ?? clockNow();
  return db.transaction(async (tx) => {
    await lockKeys(tx, [walletLockKey(address)]);
    const lifted = await liftActiveBlocks(tx, "wallet", address, { liftedBy: actor, liftReason: reason, now: at });
    return { lifted };
  });
}

/** Whether the wallet has an active block of any kind (the `isBlocked` of the interface). */
export async function isWalletBlocked(db: Executor, walletAddress: string, now: Date = clockNow()): Promise<boolean> {
  return hasActiveBlock(db, "wallet", addressOrThrow(walletAddress), now);
}

/** The wallet's active blocks, newest first. */
export async function activeWalletBlocks(db: Executor, walletAddress: string, now: Date = clockNow()): Promise<Block[]> {
  return findActiveBlocks(db, "wallet", addressOrThrow(walletAddress), now);
}

/** Every block the wallet ever had (active, expired, lifted), newest first. */
export async function listBlocks(db: Executor, walletAddress: string): Promise<Block[]> {
  return listBlocksOf(db, "wallet", addressOrThrow(walletAddress));
}
