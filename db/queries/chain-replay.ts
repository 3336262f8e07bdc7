import type { Hex } from "viem";
import { run, type Executor } from "@/db/sql/run";

export type ConfirmedRawTransaction = { relayer: Hex; nonce: number; raw: Hex };

const CONFIRMED_FROM = `
    WITH f AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS f(relayer, nonce))
    SELECT t.relayer_address AS relayer, t.nonce, t.raw_transaction AS raw
      FROM relay_transactions t JOIN f ON t.relayer_address = f.relayer AND t.nonce >= f.nonce
      WHERE t.status = 'confirmed' AND t.raw_transaction IS NOT NULL
    UNION ALL
    SELECT n.relayer_address, n.nonce, n.raw_transaction
      FROM relayer_nonce_fills n JOIN f ON n.relayer_address = f.relayer AND n.nonce >= f.nonce
      WHERE n.status = 'confirmed'
    ORDER BY relayer, nonce`;

/**
 * The confirmed transactions (relays and nonce fills) of each given relayer from the given nonce on, in nonce
 * order: what a local chain restarted from an older state dump lost and must be given again (scripts/start.ts).
 */
export async function listConfirmedRawTransactionsFrom(db: Executor, from: readonly { relayer: Hex; nonce: number }[]): Promise<ConfirmedRawTransaction[]> {
  if (from.length === 0) return [];
  const rows = await run(db, { text: CONFIRMED_FROM, params: [from.map((f) => f.relayer.toLowerCase()), from.map((f) => f.nonce)] });
  return rows.map((r) => ({ relayer: r.relayer as Hex, nonce: Number(r.nonce), raw: r.raw as Hex }));
}

/** Every relayer account the workers registered. */
export async function listRelayerAddresses(db: Executor): Promise<Hex[]> {
  const rows = await run(db, { text: "SELECT address FROM relayer_accounts ORDER BY address", params: [] });
  return rows.map((r) => r.address as Hex);
}
