import { sql } from "drizzle-orm";
import type { Database } from "@/db/client";
import { query, run, type Query } from "@/db/sql/run";
import { none } from "./request-times";

/**
 * The registry's mirror (db/schema.ts, registry_sponsored_wallets): the wallets its `WalletSponsored` events name,
 * and per registry the next block to read. Creation reads it inside create_sponsorship_request; the worker writes
 * it (worker/registry-index.ts).
 */

/** The next block to read for this registry, or undefined before the first pass. */
export async function readRegistryCursor(db: Database, registry: string): Promise<bigint | undefined> {
  const rows = await run<{ next_block: string }>(
    db,
    sql`
    SELECT next_block::text FROM registry_index WHERE registry_address = ${registry.toLowerCase()}`,
  );
  const row = rows[0];
  return row ? BigInt(row.next_block) : undefined;
}

/**
 * Records the wallets of one range and moves the cursor past it, in one statement (so atomically, without a
 * transaction held open across round trips). The cursor only moves forward (GREATEST), so two workers indexing the
 * same range at once write the same rows and the same cursor.
 */
export async function recordRegistryRange(
  db: Database,
  registry: string,
  wallets: readonly { wallet: string; blockNumber: bigint }[],
  nextBlock: bigint,
): Promise<void> {
  const address = registry.toLowerCase();
  const insertWallets =
    wallets.length === 0
      ? sql``
      : sql`WITH found AS (
          INSERT INTO registry_sponsored_wallets (registry_address, wallet_address, block_number)
          VALUES ${sql.join(
            // In address order, as recordFoundSponsored inserts (no crosswise wait between two inserts of the same wallets).
            [...wallets]
              .map((w) => ({ wallet: w.wallet.toLowerCase(), blockNumber: w.blockNumber }))
              .sort((a, b) => (a.wallet < b.wallet ? -1 : a.wallet > b.wallet ? 1 : 0))
              .map((w) => sql`(${address}, ${w.wallet}, ${w.blockNumber.toString()}::bigint)`),
            sql`, `,
          )}
          ON CONFLICT DO NOTHING
        ) `;
  await run(
    db,
    sql`
    ${insertWallets}INSERT INTO registry_index (registry_address, next_block, updated_at) VALUES (${address}, ${nextBlock.toString()}::bigint, now())
    ON CONFLICT (registry_address) DO UPDATE
    SET next_block = GREATEST(registry_index.next_block, EXCLUDED.next_block), updated_at = now()`,
  );
}

const RECORD_FOUND_SPONSORED = `
    INSERT INTO registry_sponsored_wallets (registry_address, wallet_address, block_number)
    SELECT $1, w, $3::bigint FROM unnest($2::text[]) AS w
    ON CONFLICT DO NOTHING`;

/**
 * Wallets review found sponsored by this registry (`isSponsored`, or the dry run's AlreadySponsored), into its mirror:
 * the mirror starts REGISTRY_INDEX_LOOKBACK blocks back when the deployment block is unknown, so one sponsored before
 * that would otherwise be created (201), counted and reviewed again at every request. `seenAt` is the newest head
 * the worker knew (review does not learn the event's own block).
 */
export function recordFoundSponsored(registry: string, wallets: readonly string[], seenAt: bigint): Query<undefined> {
  // In address order, as recordRegistryRange inserts: two inserts of the same wallets never wait on each other crosswise.
  const sorted = [...new Set(wallets.map((w) => w.toLowerCase()))].sort();
  return query(RECORD_FOUND_SPONSORED, [registry.toLowerCase(), sorted, seenAt.toString()], none);
}
