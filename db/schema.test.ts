import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { relayTransactions, requestEvents, sponsorshipRequests, wallets } from "./schema";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

async function newWallet() {
  const address = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(20))).toString("hex")}`;
  const [wallet] = await t.db.insert(wallets).values({ walletAddress: address }).returning();
  return wallet!;
}

async function newRequest(walletId: string, walletAddress: string) {
  const [request] = await t.db.insert(sponsorshipRequests).values({ walletId, walletAddress, ipAddress: "127.0.0.1" }).returning();
  return request!;
}

/**
 * What a statement was refused with: its SQLSTATE and the constraint (or, raised by a trigger, the message), from the
 * driver's error under drizzle's wrapping; undefined if it ran.
 */
async function refusedWith(statement: PromiseLike<unknown>): Promise<string | undefined> {
  try {
    await statement;
  } catch (error) {
    for (let e: unknown = error; e instanceof Error; e = e.cause) {
      const { code, constraint_name: constraint, message } = e as { code?: unknown; constraint_name?: string; message: string };
      if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return `${code} ${constraint ?? message}`;
    }
    return `no SQLSTATE: ${String(error)}`;
  }
  return undefined;
}

describe("database invariants", () => {
  it("refuses an address that is not lowercase hex", async () => {
    expect(await refusedWith(t.db.insert(wallets).values({ walletAddress: "0xABCDEF0000000000000000000000000000000000" }))).toBe(
      "23514 wallets_wallet_address_lowercase",
    );
  });

  it("allows one non-terminal request per wallet", async () => {
    const wallet = await newWallet();
    await newRequest(wallet.id, wallet.walletAddress);
    expect(await refusedWith(newRequest(wallet.id, wallet.walletAddress))).toBe("23505 sponsorship_requests_one_open_per_wallet");
  });

  it("allows only the transitions of the state machine and records each in the audit trail", async () => {
    const wallet = await newWallet();
    const request = await newRequest(wallet.id, wallet.walletAddress);
    expect(
      await refusedWith(t.db.update(sponsorshipRequests).set({ status: "completed", completedAt: new Date() }).where(eq(sponsorshipRequests.id, request.id))),
    ).toMatch(/^23514 illegal sponsorship request transition pending -> completed /);
    await t.db
      .update(sponsorshipRequests)
      .set({ status: "rejected", rejectedAt: new Date(), statusActor: "worker:test", statusReason: "wallet_blocked" })
      .where(eq(sponsorshipRequests.id, request.id));
    // Terminal: never changes again.
    expect(
      await refusedWith(t.db.update(sponsorshipRequests).set({ status: "approved", approvedAt: new Date() }).where(eq(sponsorshipRequests.id, request.id))),
    ).toMatch(/^23514 illegal sponsorship request transition rejected -> approved /);
    const events = await t.db.select().from(requestEvents).where(eq(requestEvents.sponsorshipRequestId, request.id)).orderBy(requestEvents.id);
    expect(events.map((e) => [e.fromStatus, e.toStatus, e.actor, e.reason])).toEqual([
      [null, "pending", "api", null],
      ["pending", "rejected", "worker:test", "wallet_blocked"],
    ]);
    // After a terminal request, a new one for the same wallet is allowed.
    await expect(newRequest(wallet.id, wallet.walletAddress)).resolves.toBeDefined();
  });

  it("refuses a status without its timestamp", async () => {
    const wallet = await newWallet();
    const request = await newRequest(wallet.id, wallet.walletAddress);
    expect(await refusedWith(t.db.update(sponsorshipRequests).set({ status: "approved" }).where(eq(sponsorshipRequests.id, request.id)))).toBe(
      "23514 sponsorship_requests_timestamps_match_status",
    );
  });

  it("refuses illegal relay transitions and a relay for a missing request", async () => {
    const wallet = await newWallet();
    const request = await newRequest(wallet.id, wallet.walletAddress);
    const [relay] = await t.db.insert(relayTransactions).values({ sponsorshipRequestId: request.id, relayAttempt: 1 }).returning();
    expect(await refusedWith(t.db.update(relayTransactions).set({ status: "confirmed" }).where(eq(relayTransactions.id, relay!.id)))).toMatch(
      /^23514 illegal relay transition queued -> confirmed /,
    );
    expect(await refusedWith(t.db.insert(relayTransactions).values({ sponsorshipRequestId: "00000000-0000-4000-8000-000000000000", relayAttempt: 1 }))).toMatch(
      /^23503 /,
    );
    const [{ n }] = (await t.db.execute(sql`SELECT count(*)::int AS n FROM relay_transactions`)) as unknown as [{ n: number }];
    expect(n).toBe(1);
  });
});
