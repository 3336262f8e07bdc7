import { sql } from "drizzle-orm";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCidr } from "@/lib/sponsorship/client-identity";
import { createTestDatabase, type TestDatabase } from "@/test/db";

/**
 * The administrator's IP blocks are matched by client_ip_blocked (db/functions/client_ip_blocked.sql) with `&&`
 * on the partial GiST index ip_blocks_active_cidr_idx (inet_ops): a long block list must cost an index search per
 * creation and registration, not a scan of every block.
 */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  // 5,000 active blocks (IPv4 /24s and IPv6 /48s) and 1,000 lifted ones.
  await t.db.execute(sql`
    INSERT INTO ip_blocks (cidr, reason, created_by, lifted_at, lifted_by)
    SELECT CASE WHEN i % 2 = 0 THEN format('10.%s.%s.0/24', (i / 256) % 256, i % 256)::cidr
                ELSE format('2001:db8:%s::/48', to_hex(i))::cidr END,
           'bench', 'test', CASE WHEN i > 5000 THEN now() END, CASE WHEN i > 5000 THEN 'test' END
    FROM generate_series(1, 6000) i`);
  await t.db.execute(sql`ANALYZE ip_blocks`);
});
afterAll(async () => t?.drop());

/** Index and sequential scans of ip_blocks by `body`, counted by PostgreSQL's statistics, in one session. */
async function scans(body: (q: (text: string) => Promise<unknown>) => Promise<void>): Promise<{ index: number; seq: number }> {
  const c = await t.db.$client.reserve();
  try {
    const read = async () => {
      await c.unsafe("SELECT pg_stat_force_next_flush()");
      await c.unsafe("SELECT pg_stat_clear_snapshot()");
      const [r] = await c.unsafe<{ idx: string; seq: string }[]>(`SELECT
        (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'ip_blocks_active_cidr_idx')::text AS idx,
        (SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'ip_blocks')::text AS seq`);
      return { index: Number(r!.idx), seq: Number(r!.seq) };
    };
    const before = await read();
    await body((text) => c.unsafe(text));
    const after = await read();
    return { index: after.index - before.index, seq: after.seq - before.seq };
  } finally {
    c.release();
  }
}

describe("administrator IP blocks", () => {
  it("match a client's network through the partial GiST index, IPv4 and IPv6 alike, never a scan of every block", async () => {
    const counted = await scans(async (q) => {
      for (const network of ["10.0.7.9/32", "2001:db8:7::/64", "192.0.2.1/32", "2001:db8:ffff::/64"]) {
        await q(`SELECT client_ip_blocked('${network}'::cidr)`);
      }
    });
    expect(counted).toEqual({ index: 4, seq: 0 });
  });

  it("answer what the plain rule says: overlap with an active block, never a lifted one", async () => {
    const ask = async (network: string) => (await t.db.execute<{ b: boolean }>(sql`SELECT client_ip_blocked(${network}::cidr) AS b`))[0]!.b;
    expect(await ask("10.0.8.77/32")).toBe(true); // inside 10.0.8.0/24 (i = 8)
    expect(await ask("2001:db8:7:1::/64")).toBe(true); // inside 2001:db8:7::/48 (i = 7)
    expect(await ask("2001:db8:1771::/64")).toBe(false); // i = 6001: lifted
    expect(await ask("192.0.2.1/32")).toBe(false);
  });

  it("are written as PostgreSQL prints them, so what an administrator is told is what the table holds", async () => {
    // The IPv4-compatible ::a.b.c.d form is where PostgreSQL's text and plain hex part ways (::1:0 is ::0.1.0.0).
    const edges = ["::0.1.0.0", "::1:0", "::1", "::2", "::ffff", "::1:0:0", "::1.2.3.4", "::1:0/112", "2001:db8::/32", "fe80::1:2"];
    const random = fc.sample(
      fc.oneof(
        fc.ipV6(),
        fc.ipV6().map((a) => `${a}/${64}`),
      ),
      { numRuns: 300, seed: 42 },
    );
    for (const text of [...edges, ...random]) {
      const ours = parseCidr(text);
      if (ours === undefined || !ours.includes(":")) continue; // IPv4 (mapped addresses are recorded as IPv4)
      const [row] = await t.db.$client<{ c: string }[]>`SELECT ${ours}::cidr::text AS c`;
      expect(ours, text).toBe(row!.c);
    }
  });
});
