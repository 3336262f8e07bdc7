import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adminActions } from "@/db/schema";
import { isWalletBlocked } from "@/lib/sponsorship/blocks";
import { signedInAdministrator } from "@/test/admin";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { blockWalletAsAdministrator, lookUpWallet, unblockWalletAsAdministrator } from "./wallets";

const ADMIN_TOKEN = "wallets-test-admin-token-123";
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const session = async () => (await signedInAdministrator(t.db, ADMIN_TOKEN)).session;

const address = () => `0x${randomBytes(20).toString("hex")}`;

describe("wallet administration", () => {
  it("blocks a wallet with a reason, names the session as actor, and audits it", async () => {
    const s = await session();
    const wallet = address().toUpperCase().replace("0X", "0x");
    const { block, created } = await blockWalletAsAdministrator(
      t.db,
      { session: s, ipAddress: "203.0.113.9" },
      { walletAddress: wallet, reason: "  abuse report #12 " },
    );
    expect(created).toBe(true);
    expect(block).toMatchObject({ subject: wallet.toLowerCase(), kind: "admin", reason: "abuse report #12", createdBy: `admin:${s.id}` });
    expect(await isWalletBlocked(t.db, wallet)).toBe(true);
    const audit = await t.db.select().from(adminActions).where(eq(adminActions.subject, wallet.toLowerCase()));
    expect(audit.map((a) => [a.action, a.reason, a.sessionId, a.ipAddress])).toEqual([["block_wallet", "abuse report #12", s.id, "203.0.113.9"]]);
  });

  it("unblocks with a reason and keeps the block history", async () => {
    const s = await session();
    const wallet = address();
    await blockWalletAsAdministrator(t.db, { session: s, ipAddress: null }, { walletAddress: wallet, reason: "suspicious" });
    const { lifted } = await unblockWalletAsAdministrator(t.db, { session: s, ipAddress: null }, { walletAddress: wallet, reason: "owner verified" });
    expect(lifted).toHaveLength(1);
    expect(await isWalletBlocked(t.db, wallet)).toBe(false);
    const view = await lookUpWallet(t.db, wallet);
    expect(view?.isBlocked).toBe(false);
    expect(view?.wallet).toBeNull();
    expect(view?.blockHistory.map((b) => [b.reason, b.liftReason, b.liftedBy])).toEqual([["suspicious", "owner verified", `admin:${s.id}`]]);
    expect(view?.actions.map((a) => [a.action, a.reason])).toEqual([
      ["unblock_wallet", "owner verified"],
      ["block_wallet", "suspicious"],
    ]);
  });

  it("writes a block and its audit record together or not at all", async () => {
    const s = await session();
    const wallet = address();
    // An audit record that cannot be written (a session id that is not a UUID) must take the block with it. The
    // refusal is that one (22P02, invalid_text_representation), not some other failure before the block was written.
    const broken = { ...s, id: "not-a-session-id" };
    const auditRefused = { cause: expect.objectContaining({ code: "22P02", message: expect.stringContaining("uuid") }) };
    await expect(blockWalletAsAdministrator(t.db, { session: broken, ipAddress: null }, { walletAddress: wallet, reason: "abuse" })).rejects.toMatchObject(
      auditRefused,
    );
    expect(await isWalletBlocked(t.db, wallet)).toBe(false);
    await blockWalletAsAdministrator(t.db, { session: s, ipAddress: null }, { walletAddress: wallet, reason: "abuse" });
    await expect(unblockWalletAsAdministrator(t.db, { session: broken, ipAddress: null }, { walletAddress: wallet, reason: "ok" })).rejects.toMatchObject(
      auditRefused,
    );
    expect(await isWalletBlocked(t.db, wallet)).toBe(true);
  });

  it("refuses a block without a reason and writes nothing", async () => {
    const s = await session();
    const wallet = address();
    await expect(blockWalletAsAdministrator(t.db, { session: s, ipAddress: null }, { walletAddress: wallet, reason: "   " })).rejects.toMatchObject({
      code: "invalid_value",
    });
    expect(await isWalletBlocked(t.db, wallet)).toBe(false);
    expect(await t.db.select().from(adminActions).where(eq(adminActions.subject, wallet))).toEqual([]);
  });

  it("looks up nothing for a string that is not an address", async () => {
    expect(await lookUpWallet(t.db, "0x123")).toBeNull();
  });
});
