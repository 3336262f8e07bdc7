import postgres from "postgres";
import { seedFreshWallets } from "./seed";
import type { Stack } from "./stack";

let seedRound = 0;

/** Requests and wallets that exist, for the read endpoints; fresh registered wallets for POST /sponsorship/request. */
export async function httpData(stack: Stack, seeded: number) {
  const sql = postgres(stack.databaseUrl!, { max: 1, onnotice: () => {} });
  try {
    let rows = await sql<{ id: string; wallet_address: string }[]>`
      SELECT id, wallet_address FROM sponsorship_requests ORDER BY requested_at DESC LIMIT 5000`;
    if (rows.length === 0) {
      // Nothing yet (an HTTP-only run): seed a little history, then read it.
      const { growRequests } = await import("./seed");
      await growRequests(sql, 0, 2000);
      rows = await sql<{ id: string; wallet_address: string }[]>`SELECT id, wallet_address FROM sponsorship_requests LIMIT 5000`;
    }
    // A prefix per call: wallets seeded for an earlier run already have requests.
    const fresh = await seedFreshWallets(sql, seeded, `b${(seedRound++ % 16).toString(16)}`);
    return { requestIds: rows.map((r) => r.id), historyWallets: [...new Set(rows.map((r) => r.wallet_address))], freshRegisteredWallets: fresh };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Open requests the HTTP run created (the worker was paused): rejected, so no worker relays them afterwards. */
export async function rejectOpenRequests(databaseUrl: string): Promise<number> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`SET lock_timeout = '10s'`;
    const rows = await sql`
      UPDATE sponsorship_requests SET status = 'rejected', rejected_at = now(), status_actor = 'bench',
        status_reason = 'bench: created by the HTTP measurement, not to be relayed'
      WHERE id IN (SELECT id FROM sponsorship_requests WHERE status = 'pending' FOR UPDATE SKIP LOCKED)
      RETURNING id`;
    return rows.length;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
