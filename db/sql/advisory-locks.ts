import { sql, type SQL } from "drizzle-orm";
import { run, type Transaction } from "./run";

/**
 * Serialises transactions that work on the same keys (an IP's or a wallet's counters and blocks) until the
 * transaction ends. Keys are taken in sorted order, so two transactions never wait on each other in a cycle.
 * One round trip. Call it in its own statement, before reading what it protects: in READ COMMITTED a later
 * statement sees everything the previous holder committed.
 */
export async function lockKeys(tx: Transaction, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await run(tx, lockKeysSql(keys));
}

/** The statement of lockKeys (for a pipelined transaction, see ./transaction.ts). */
export function lockKeysSql(keys: readonly string[]): SQL {
  const sorted = [...new Set(keys)].sort();
  const locks = sorted.map((key) => sql`pg_advisory_xact_lock(hashtextextended(${key}, 0))`);
  return sql`SELECT ${sql.join(locks, sql`, `)}`;
}
