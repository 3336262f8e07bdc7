import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertBlock } from "@/db/queries/blocks";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { activeWalletBlocks, blockWallet, isWalletBlocked, listBlocks, unblockWallet } from "./blocks";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const newAddress = () => `0x${randomBytes(20).toString("hex")}`;

describe("administrator blocks", () => {
  it("blocks a wallet without expiry, with reason and actor, until an administrator lifts it", async () => {
    const address = newAddress();
    expect(await isWalletBlocked(t.db, address)).toBe(false);
    const { block, created } = await blockWallet(t.db, { walletAddress: address.toUpperCase().replace("0X", "0x"), reason: "fraud", actor: "admin:test" });
    expect(created).toBe(true);
    expect(block).toMatchObject({
      subjectType: "wallet",
      subject: address,
      kind: "admin",
      reason: "fraud",
      createdBy: "admin:test",
      expiresAt: null,
      liftedAt: null,
    });
    // No expiry: still blocked a year later.
    expect(await isWalletBlocked(t.db, address, new Date(Date.now() + 365 * 24 * 3600_000))).toBe(true);

    const { lifted } = await unblockWallet(t.db, { walletAddress: address, reason: "appeal accepted", actor: "admin:other" });
    expect(lifted).toHaveLength(1);
    expect(lifted[0]).toMatchObject({ liftedBy: "admin:other", liftReason: "appeal accepted" });
    expect(lifted[0]!.liftedAt).toBeInstanceOf(Date);
    expect(await isWalletBlocked(t.db, address)).toBe(false);

    const history = await listBlocks(t.db, address);
    expect(history).toHaveLength(1);
    expect(history[0]!.liftedBy).toBe("admin:other");
  });

  it("is idempotent: blocking an already blocked wallet keeps the existing block", async () => {
    const address = newAddress();
    const first = await blockWallet(t.db, { walletAddress: address, reason: "one", actor: "admin:a" });
    const [again] = await Promise.all([
      blockWallet(t.db, { walletAddress: address, reason: "two", actor: "admin:b" }),
      blockWallet(t.db, { walletAddress: address, reason: "three", actor: "admin:c" }),
    ]);
    expect(again.created).toBe(false);
    expect(again.block.id).toBe(first.block.id);
    expect(await listBlocks(t.db, address)).toHaveLength(1);
  });

  it("counts an automatic block as blocked only until it expires", async () => {
    const address = newAddress();
    const start = new Date();
    await insertBlock(t.db, {
      subjectType: "wallet",
      subject: address,
      kind: "automatic",
      reason: "rate limit",
      createdBy: "rate_limiter",
      createdAt: start,
      expiresAt: new Date(start.getTime() + 15 * 60_000),
    });
    expect(await isWalletBlocked(t.db, address, new Date(start.getTime() + 15 * 60_000 - 1))).toBe(true);
    expect(await isWalletBlocked(t.db, address, new Date(start.getTime() + 15 * 60_000))).toBe(false);
    expect(await activeWalletBlocks(t.db, address, start)).toHaveLength(1);
  });

  it("lifts automatic blocks too when an administrator unblocks", async () => {
    const address = newAddress();
    const start = new Date();
    await insertBlock(t.db, {
      subjectType: "wallet",
      subject: address,
      kind: "automatic",
      reason: "rate limit",
      createdBy: "rate_limiter",
      createdAt: start,
      expiresAt: new Date(start.getTime() + 15 * 60_000),
    });
    await blockWallet(t.db, { walletAddress: address, reason: "fraud", actor: "admin:a", now: start });
    const { lifted } = await unblockWallet(t.db, { walletAddress: address, reason: "cleared", actor: "admin:a", now: start });
    expect(lifted.map((b) => b.kind).sort()).toEqual(["admin", "automatic"]);
    expect(await isWalletBlocked(t.db, address, start)).toBe(false);
  });

  it("refuses a malformed address, an empty reason or an empty actor", async () => {
    await expect(blockWallet(t.db, { walletAddress: "0x123", reason: "x", actor: "a" })).rejects.toMatchObject({ code: "invalid_address" });
    await expect(blockWallet(t.db, { walletAddress: newAddress(), reason: "  ", actor: "a" })).rejects.toMatchObject({ code: "invalid_value" });
    await expect(blockWallet(t.db, { walletAddress: newAddress(), reason: "a\u0000b", actor: "a" })).rejects.toMatchObject({ code: "invalid_value" });
    await expect(unblockWallet(t.db, { walletAddress: newAddress(), reason: "\u0000", actor: "a" })).rejects.toMatchObject({ code: "invalid_value" });
    await expect(unblockWallet(t.db, { walletAddress: newAddress(), reason: "x", actor: "" })).rejects.toMatchObject({ code: "invalid_value" });
  });
});
