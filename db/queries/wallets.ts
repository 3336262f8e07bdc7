import { sql } from "drizzle-orm";
import type { Database } from "@/db/client";
import { lockKeysSql } from "@/db/sql/advisory-locks";
import { run, type Executor } from "@/db/sql/run";
import { insertHitsSql, limitReachedAtMs } from "./rate-limits";
import { twoStepTransaction } from "@/db/sql/transaction";
import { blockActive, isoUtc, ts } from "@/db/sql/fragments";

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
  const rows = await run<WalletView>(db, sql`SELECT ${walletViewColumns(now)} FROM wallets w WHERE w.wallet_address = ${address}`);
  return rows[0];
}

function upsertWalletSql(address: string, now: Date) {
  return sql`
    WITH w AS (
      INSERT INTO wallets (wallet_address, first_seen_at, last_seen_at)
      VALUES (${address}, ${ts(now)}, ${ts(now)})
      ON CONFLICT (wallet_address) DO UPDATE SET last_seen_at = GREATEST(wallets.last_seen_at, EXCLUDED.last_seen_at)
      RETURNING *, (xmax = 0) AS created
    )
    SELECT ${walletViewColumns(now)}, w.created FROM w`;
}

export type RegistrationAttempt =
  { admitted: false; ipBlocked?: true; limitReachedAtMs: number | null } | { admitted: true; wallet: WalletView; created: boolean };

/**
 * A registration in two round trips (db/sql/transaction.ts): BEGIN, the IP's lock and its registration count
 * leave together; `admit` (the domain's rule) sees when the IP reached its limit; if admitted, the counted hit,
 * the upsert and COMMIT leave together.
 */
export async function attemptRegistration(
  db: Database,
  input: { clientKey: string; clientNetwork: string; address: string; now: Date; limit: number; windowStart: Date; lockKey: string },
  admit: (limitReachedAtMs: number | null) => boolean,
): Promise<RegistrationAttempt> {
  const { clientKey: ip, address, now } = input;
  return twoStepTransaction<RegistrationAttempt>(
    db,
    [
      lockKeysSql([input.lockKey]),
      sql`SELECT ${limitReachedAtMs("register_ip", ip, input.limit, input.windowStart)} AS at,
        client_ip_blocked(${input.clientNetwork}::cidr) AS "ipBlocked"`,
    ],
    ([, countRows]) => {
      const { at: reachedAt, ipBlocked } = countRows![0] as { at: number | null; ipBlocked: boolean };
      // An administrator's IP block refuses before anything is counted (decisions.md, "On the open internet").
      if (ipBlocked) return { statements: [], finish: () => ({ admitted: false as const, ipBlocked: true as const, limitReachedAtMs: null }) };
      if (!admit(reachedAt)) return { statements: [], finish: () => ({ admitted: false as const, limitReachedAtMs: reachedAt }) };
      return {
        statements: [insertHitsSql([{ scope: "register_ip", key: ip }], now), upsertWalletSql(address, now)],
        finish: ([, upserted]) => {
          const { created, ...wallet } = upserted![0] as WalletView & { created: boolean };
          return { admitted: true as const, wallet, created };
        },
      };
    },
  );
}
