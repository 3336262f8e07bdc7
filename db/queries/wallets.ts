import { sql } from "drizzle-orm";
import type { Executor } from "./executor";
import { blockActive, isoUtc, ts } from "./sql-helpers";

/** A wallet as the API shows it, timestamps already in the wire format. */
export type WalletView = {
  id: string;
  walletAddress: string;
  firstSeenAt: string;
  lastSeenAt: string;
  sponsorshipCount: number;
  isBlocked: boolean;
};

const walletViewColumns = (now: Date) => sql`
  w.id,
  w.wallet_address AS "walletAddress",
  ${isoUtc(sql`w.first_seen_at`)} AS "firstSeenAt",
  ${isoUtc(sql`w.last_seen_at`)} AS "lastSeenAt",
  w.sponsorship_count AS "sponsorshipCount",
  EXISTS (
    SELECT 1 FROM blocks b
    WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address AND ${blockActive("b", now)}
  ) AS "isBlocked"`;

export async function findWalletView(db: Executor, address: string, now: Date): Promise<WalletView | undefined> {
  const rows = await db.execute<WalletView>(sql`SELECT ${walletViewColumns(now)} FROM wallets w WHERE w.wallet_address = ${address}`);
  return rows[0];
}

/**
 * Registers the wallet, or touches `last_seen_at` when it exists (one statement, safe under concurrency).
 * `created` tells which happened.
 */
export async function upsertWallet(db: Executor, address: string, now: Date): Promise<WalletView & { created: boolean }> {
  const rows = await db.execute<WalletView & { created: boolean }>(sql`
    WITH w AS (
      INSERT INTO wallets (wallet_address, first_seen_at, last_seen_at)
      VALUES (${address}, ${ts(now)}, ${ts(now)})
      ON CONFLICT (wallet_address) DO UPDATE SET last_seen_at = GREATEST(wallets.last_seen_at, EXCLUDED.last_seen_at)
      RETURNING *, (xmax = 0) AS created
    )
    SELECT ${walletViewColumns(now)}, w.created FROM w`);
  return rows[0]!;
}

/** The wallet's id, or undefined when the address is not registered. */
export async function findWalletId(db: Executor, address: string): Promise<string | undefined> {
  const rows = await db.execute<{ id: string }>(sql`SELECT id FROM wallets WHERE wallet_address = ${address}`);
  return rows[0]?.id;
}
