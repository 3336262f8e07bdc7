import type postgres from "postgres";
import { note } from "./util";

/**
 * Direct SQL seeding for the bench (fast: INSERT ... SELECT over generate_series). Seeded addresses carry a
 * prefix per purpose so they never collide with the random addresses of the API runs.
 */

/** `0x` + 2-hex prefix + 38 hex digits of i. */
export const seededAddress = (prefix: string, i: number) => `0x${prefix}${i.toString(16).padStart(38, "0")}`;

/** Registers `count` wallets with no request (for POST /sponsorship/request runs); returns their addresses. */
export async function seedFreshWallets(sql: postgres.Sql, count: number, prefix = "be"): Promise<string[]> {
  await sql`
    INSERT INTO wallets (wallet_address)
    SELECT '0x' || ${prefix} || lpad(to_hex(g), 38, '0') FROM generate_series(0, ${count - 1}::int) AS g
    ON CONFLICT (wallet_address) DO NOTHING`;
  return Array.from({ length: count }, (_, i) => seededAddress(prefix, i));
}

/**
 * Grows the requests table to `total` rows of history: every wallet has two requests, an older failed one
 * (with its failed relay attempt) and a completed one (with its confirmed relay and a transaction hash), so the
 * by-id read joins a wallet and a relay, and history pages have more than one item. Triggers are bypassed
 * (session_replication_role = replica) for speed: the audit rows they would add are not read by these endpoints.
 */
export async function growRequests(sql: postgres.Sql, from: number, total: number, chunk = 100_000): Promise<void> {
  for (let start = from; start < total; start += chunk) {
    const end = Math.min(total, start + chunk);
    const walletFrom = Math.floor(start / 2);
    const walletTo = Math.ceil(end / 2) - 1;
    note(`growth: seeding requests ${start}..${end - 1}`);
    await sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`
        INSERT INTO wallets (wallet_address, sponsorship_count, first_seen_at, last_seen_at)
        SELECT '0x' || 'cc' || lpad(to_hex(g), 38, '0'), 2,
               now() - make_interval(secs => g), now() - make_interval(secs => g)
        FROM generate_series(${walletFrom}::int, ${walletTo}::int) AS g
        ON CONFLICT (wallet_address) DO NOTHING`;
      await tx`
        WITH w AS (
          SELECT id, wallet_address
          FROM wallets
          WHERE wallet_address BETWEEN ${"0xcc" + walletFrom.toString(16).padStart(38, "0")} AND ${"0xcc" + walletTo.toString(16).padStart(38, "0")}
        ), r AS (
          INSERT INTO sponsorship_requests (wallet_id, wallet_address, status, eligibility_reason, ip_address, user_agent,
            requested_at, approved_at, relayed_at, completed_at, failed_at, failure_reason, status_actor)
          SELECT w.id, w.wallet_address, s.status::request_status, 'eligible', '10.9.9.9', 'bench-seed',
                 t.at, t.at + interval '150 ms', t.at + interval '300 ms',
                 CASE WHEN s.status = 'completed' THEN t.at + interval '1200 ms' END,
                 CASE WHEN s.status = 'failed' THEN t.at + interval '90 s' END,
                 CASE WHEN s.status = 'failed' THEN 'seeded failure' END,
                 'bench-seed'
          FROM w
          CROSS JOIN LATERAL (VALUES ('failed', 0), ('completed', 1)) AS s(status, k)
          -- Spread over the last 30 days; the failed attempt ten minutes before the completed one.
          CROSS JOIN LATERAL (
            SELECT now() - make_interval(secs => (hashtext(w.wallet_address) & 2147483647) % 2592000 + 600 * (1 - s.k)) AS at
          ) AS t
          RETURNING id, status, requested_at
        )
        INSERT INTO relay_transactions (sponsorship_request_id, relay_attempt, status, relayer_address, nonce, transaction_hash,
          created_at, submitted_at, confirmed_at, failed_at, failure_reason, gas_used)
        SELECT r.id, 1, CASE WHEN r.status = 'completed' THEN 'confirmed'::relay_status ELSE 'failed'::relay_status END,
               '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', 0,
               '0x' || md5(r.id::text) || md5(r.id::text || 'h'),
               r.requested_at + interval '300 ms', r.requested_at + interval '300 ms',
               CASE WHEN r.status = 'completed' THEN r.requested_at + interval '1200 ms' END,
               CASE WHEN r.status = 'failed' THEN r.requested_at + interval '90 s' END,
               CASE WHEN r.status = 'failed' THEN 'seeded failure' END,
               CASE WHEN r.status = 'completed' THEN 60000 END
        FROM r`;
    });
  }
  note("growth: VACUUM ANALYZE, CHECKPOINT");
  for (const table of ["wallets", "sponsorship_requests", "relay_transactions"]) await sql.unsafe(`VACUUM ANALYZE ${table}`);
  // The bulk load's WAL is flushed now, not by a checkpoint in the middle of the measurement (seen as one p99 of
  // the 1M-row step at 2x while every statement's own time stayed flat).
  await sql
    .unsafe("CHECKPOINT")
    .catch((error: unknown) => note(`growth: CHECKPOINT not allowed here (${error instanceof Error ? error.message : String(error)}); measuring anyway`));
}

/** A random sample of seeded request ids, wallet addresses and transaction hashes to read back. */
export async function sampleSeeded(sql: postgres.Sql, size: number): Promise<{ ids: string[]; wallets: string[]; hashes: string[] }> {
  const rows = await sql<{ id: string; wallet_address: string; hash: string | null }[]>`
    WITH s AS (
      SELECT id, wallet_address FROM sponsorship_requests WHERE status_actor = 'bench-seed' ORDER BY random() LIMIT ${size}
    )
    SELECT s.id, s.wallet_address, t.transaction_hash AS hash
    FROM s LEFT JOIN relay_transactions t ON t.sponsorship_request_id = s.id AND t.relay_attempt = 1`;
  return {
    ids: rows.map((r) => r.id),
    wallets: [...new Set(rows.map((r) => r.wallet_address))],
    hashes: rows.map((r) => r.hash).filter((h): h is string => h !== null),
  };
}
