import { sql } from "drizzle-orm";
import { query, run, type Executor, type Query } from "@/db/sql/run";
import { blockActive, isoUtc } from "@/db/sql/fragments";

/**
 * A wallet as the API shows it, timestamps already in the wire format. Registration's answer is built the same way
 * inside db/functions/register_wallet.sql (lib/sponsorship/wallets.test.ts compares the two).
 */
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
  const rows = await run<WalletView>(db, sql`SELECT ${walletViewColumns(now)} FROM wallets w WHERE w.wallet_address = ${address}`);
  return rows[0];
}

export type RegistrationCallInput = {
  /** The client identity the limit and its lock key on (lib/sponsorship/client-identity.ts). */
  clientKey: string;
  /** The identity as a CIDR network, matched against administrator IP blocks. */
  clientNetwork: string;
  address: string;
  now: Date;
  limit: number;
  windowStart: Date;
};

export type RegistrationCallResult =
  { refusal: "ip_blocked" } | { refusal: "rate_limited"; limitReachedAtMs: number } | { outcome: "registered"; created: boolean; wallet: WalletView };

const registerWalletCall = (input: RegistrationCallInput): Query<RegistrationCallResult> =>
  query(
    "SELECT register_wallet($1::text, $2::cidr, $3::text, $4::timestamptz, $5::int, $6::timestamptz) AS result",
    [input.clientKey, input.clientNetwork, input.address, input.now.toISOString(), input.limit, input.windowStart.toISOString()],
    (rows) => rows[0]!.result as RegistrationCallResult,
  );

/**
 * One registration attempt as one prepared statement: `register_wallet` (db/functions/register_wallet.sql) checks
 * administrator IP blocks, takes the identity's lock, reads the rolling hour's count and, if admitted, counts the
 * hit and upserts the wallet, in the statement's own transaction.
 */
export async function registerWalletInDatabase(db: Executor, input: RegistrationCallInput): Promise<RegistrationCallResult> {
  return run(db, registerWalletCall(input));
}
