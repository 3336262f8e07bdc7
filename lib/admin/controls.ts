import type { Database } from "@/db/client";
import { insertAdminAction } from "@/db/queries/admin";
import { insertIpBlock, liftIpBlock, readBudgetUsage, setPaused } from "@/db/queries/controls";
import type { IpBlock, ServiceState } from "@/db/schema";
import type { Config } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { parseCidr } from "@/lib/sponsorship/client-identity";
import { SponsorshipError } from "@/lib/sponsorship/errors";
import { adminActor } from "./session";
import type { AdminContext } from "./wallets";

/**
 * The operator's brakes (decisions.md, "On the open internet"): pause and resume sponsorships, block and unblock an
 * IP address or CIDR prefix. Each change and its audit record in admin_actions are one transaction: no pause or
 * block exists without its who, when and why. The rules they feed run in create_sponsorship_request (creation) and
 * the worker's relay stage (the pause).
 */

const logger = createLogger({ component: "admin" });

export const MAX_REASON_LENGTH = 1_000;

function requireReason(reason: string): string {
  const trimmed = reason.trim();
  // PostgreSQL text cannot hold NUL: refused here (422), as a wallet block's reason is, rather than failing the insert (500).
  if (trimmed === "" || trimmed.length > MAX_REASON_LENGTH || trimmed.includes("\u0000")) {
    throw new SponsorshipError("invalid_value", `A reason of 1 to ${MAX_REASON_LENGTH.toLocaleString("en")} characters, without NUL, is required`);
  }
  return trimmed;
}

export async function pauseSponsorships(db: Database, context: AdminContext, input: { reason: string }): Promise<{ state: ServiceState; changed: boolean }> {
  const reason = requireReason(input.reason);
  const now = context.now ?? new Date();
  const result = await db.transaction(async (tx) => {
    const outcome = await setPaused(tx, { paused: true, reason, actor: adminActor(context.session), now });
    if (outcome.changed) {
      await insertAdminAction(tx, { action: "pause", reason, sessionId: context.session.id, ipAddress: context.ipAddress, createdAt: now });
    }
    return outcome;
  });
  if (result.changed) logger.warn("sponsorships paused by an administrator", { reason, sessionId: context.session.id });
  return result;
}

export async function resumeSponsorships(
  db: Database,
  context: AdminContext,
  input: { reason?: string } = {},
): Promise<{ state: ServiceState; changed: boolean }> {
  const reason = input.reason?.trim() ? requireReason(input.reason) : null;
  const now = context.now ?? new Date();
  const result = await db.transaction(async (tx) => {
    const outcome = await setPaused(tx, { paused: false, reason: null, actor: adminActor(context.session), now });
    if (outcome.changed) {
      await insertAdminAction(tx, { action: "resume", reason, sessionId: context.session.id, ipAddress: context.ipAddress, createdAt: now });
    }
    return outcome;
  });
  if (result.changed) logger.warn("sponsorships resumed by an administrator", { sessionId: context.session.id });
  return result;
}

/** Blocks an address or prefix (422 invalid_value for text that is neither). */
export async function blockIpAsAdministrator(db: Database, context: AdminContext, input: { cidr: string; reason: string }): Promise<IpBlock> {
  const cidr = parseCidr(input.cidr);
  if (!cidr)
    throw new SponsorshipError(
      "invalid_value",
      "cidr must be an IPv4 or IPv6 address, or a prefix such as 198.51.100.0/24 or 2001:db8::/48 (not /0; a Teredo prefix of /97 or longer, a 6to4 one longer than /16)",
    );
  const reason = requireReason(input.reason);
  const now = context.now ?? new Date();
  const block = await db.transaction(async (tx) => {
    const created = await insertIpBlock(tx, { cidr, reason, actor: adminActor(context.session), now });
    await insertAdminAction(tx, {
      action: "block_ip",
      subject: cidr,
      reason,
      sessionId: context.session.id,
      ipAddress: context.ipAddress,
      details: { ipBlockId: created.id },
      createdAt: now,
    });
    return created;
  });
  logger.info("IP range blocked by an administrator", { cidr, sessionId: context.session.id });
  return block;
}

/** Lifts a block by its id; undefined when no active block has it. */
export async function unblockIpAsAdministrator(db: Database, context: AdminContext, input: { id: string; reason?: string }): Promise<IpBlock | undefined> {
  const now = context.now ?? new Date();
  const reason = input.reason?.trim() ? requireReason(input.reason) : null;
  const lifted = await db.transaction(async (tx) => {
    const row = await liftIpBlock(tx, { id: input.id, actor: adminActor(context.session), now });
    if (row) {
      await insertAdminAction(tx, {
        action: "unblock_ip",
        subject: row.cidr,
        reason,
        sessionId: context.session.id,
        ipAddress: context.ipAddress,
        details: { ipBlockId: row.id },
        createdAt: now,
      });
    }
    return row;
  });
  if (lifted) logger.info("IP block lifted by an administrator", { cidr: lifted.cidr, sessionId: context.session.id });
  return lifted;
}

export type BudgetWindowView = { window: "hour" | "day"; limit: number; used: number; left: number };

/** The budget as the dashboard shows it: per configured window, used and left (never below 0). */
export async function budgetOverview(db: Database, config: Config): Promise<BudgetWindowView[]> {
  const windows = [
    { window: "hour" as const, limit: config.sponsorBudgetPerHour },
    { window: "day" as const, limit: config.sponsorBudgetPerDay },
  ].filter((w) => w.limit > 0);
  if (windows.length === 0) return [];
  const used = await readBudgetUsage(db);
  return windows.map((w) => ({ ...w, used: used[w.window], left: Math.max(0, w.limit - used[w.window]) }));
}
