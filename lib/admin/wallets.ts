import type { Database } from "@/db/client";
import { insertAdminAction, listAdminActions } from "@/db/queries/admin";
import { findWalletByAddress, listWalletRequests } from "@/db/queries/dashboard";
import type { AdminAction, AdminSession, Block, Wallet } from "@/db/schema";
import { normalizeAddress } from "@/lib/sponsorship/address";
import { activeWalletBlocks, blockWallet, listBlocks, unblockWallet } from "@/lib/sponsorship/blocks";
import { createLogger } from "@/lib/log";
import { adminActor } from "./session";

/**
 * Wallet administration from the dashboard and the admin routes: look up, block with a reason, unblock. The
 * blocking itself is lib/sponsorship/blocks.ts (shared with the API and the worker); this adds the
 * administrator's audit record in admin_actions (who, when, why, from where), in the same transaction: a block
 * never exists without its audit record.
 */

const logger = createLogger({ component: "admin" });

export type AdminContext = { session: AdminSession; ipAddress: string | null; now?: Date };

export async function blockWalletAsAdministrator(
  db: Database,
  context: AdminContext,
  input: { walletAddress: string; reason: string },
): Promise<{ block: Block; created: boolean }> {
  const result = await db.transaction(async (tx) => {
    const blocked = await blockWallet(tx, {
      walletAddress: input.walletAddress,
      reason: input.reason,
      actor: adminActor(context.session),
      now: context.now,
    });
    await insertAdminAction(tx, {
      action: "block_wallet",
      subject: blocked.block.subject,
      reason: input.reason.trim(),
      sessionId: context.session.id,
      ipAddress: context.ipAddress,
      details: { blockId: blocked.block.id, created: blocked.created },
      createdAt: context.now,
    });
    return blocked;
  });
  logger.info("wallet blocked by an administrator", { wallet: result.block.subject, sessionId: context.session.id, created: result.created });
  return result;
}

export async function unblockWalletAsAdministrator(
  db: Database,
  context: AdminContext,
  input: { walletAddress: string; reason: string },
): Promise<{ lifted: Block[] }> {
  const result = await db.transaction(async (tx) => {
    const unblocked = await unblockWallet(tx, {
      walletAddress: input.walletAddress,
      reason: input.reason,
      actor: adminActor(context.session),
      now: context.now,
    });
    await insertAdminAction(tx, {
      action: "unblock_wallet",
      subject: normalizeAddress(input.walletAddress) ?? input.walletAddress,
      reason: input.reason.trim(),
      sessionId: context.session.id,
      ipAddress: context.ipAddress,
      details: { liftedBlockIds: unblocked.lifted.map((b) => b.id) },
      createdAt: context.now,
    });
    return unblocked;
  });
  logger.info("wallet unblocked by an administrator", { wallet: input.walletAddress, sessionId: context.session.id, lifted: result.lifted.length });
  return result;
}

export type WalletAdminView = {
  address: string;
  wallet: Wallet | null;
  isBlocked: boolean;
  activeBlocks: Block[];
  blockHistory: Block[];
  requests: Awaited<ReturnType<typeof listWalletRequests>>;
  actions: AdminAction[];
};

/** Everything the wallets page shows for one address (registered or not: a wallet can be blocked in advance). */
export async function lookUpWallet(db: Database, rawAddress: string, now: Date = new Date()): Promise<WalletAdminView | null> {
  const address = normalizeAddress(rawAddress.trim());
  if (!address) return null;
  const wallet = await findWalletByAddress(db, address);
  const [activeBlocks, blockHistory, requests, actions] = await Promise.all([
    activeWalletBlocks(db, address, now),
    listBlocks(db, address),
    wallet ? listWalletRequests(db, wallet.id) : Promise.resolve([]),
    listAdminActions(db, { subject: address, limit: 50 }),
  ]);
  return { address, wallet, isBlocked: activeBlocks.length > 0, activeBlocks, blockHistory, requests, actions };
}
