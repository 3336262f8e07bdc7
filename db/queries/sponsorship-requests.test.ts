import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeDatabase, createDatabase } from "@/db/client";
import { WEB_POOL_LIMITS } from "@/lib/http/app-context";
import { sponsorshipIpLockKey, walletLockKey } from "@/lib/sponsorship/lock-keys";
import { holdAdvisoryLock } from "@/test/advisory-lock";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { createRequestInDatabase, type CreationCallInput } from "./sponsorship-requests";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

function input(ip: string, address: string): CreationCallInput {
  const now = new Date();
  return {
    ip,
    clientKey: ip,
    clientNetwork: `${ip}/32`,
    address,
    now,
    ipLimit: 10,
    walletLimit: 5,
    windowStart: new Date(now.getTime() - 3_600_000),
    replayStart: new Date(now.getTime() - 5_000),
    autoBlockMinutes: 15,
    ipBlockReason: "ip",
    walletBlockReason: "wallet",
    requestId: crypto.randomUUID(),
    userAgent: null,
    registryAddress: null,
    budgetPerHour: 0,
    budgetPerDay: 0,
    budgetRetryHintMs: null,
  };
}

describe("create_sponsorship_request", () => {
  // Other writers (administrator blocks in lib/sponsorship/blocks.ts) serialise on the keys of lock-keys.ts; the
  // SQL function spells those keys itself, so this proves they are the same.
  for (const [name, keyOf] of [
    ["the IP's", (ip: string) => sponsorshipIpLockKey(ip)],
    ["the wallet's", (_ip: string, address: string) => walletLockKey(address)],
  ] as const) {
    it(`waits for ${name} advisory lock under the key of lib/sponsorship/lock-keys.ts`, async () => {
      const ip = `198.51.100.${Math.floor(Math.random() * 250)}`;
      const address = `0x${crypto.randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
      const lock = await holdAdvisoryLock(t.db, keyOf(ip, address));
      try {
        const call = createRequestInDatabase(t.db, input(ip, address));
        await expect(lock.blocks("the creation", call)).resolves.toEqual({ refusal: "wallet_not_registered" });
      } finally {
        await lock.end();
      }
    });
  }
});

describe("create_sponsorship_request's first gates", () => {
  it("checks the pause, then an administrator's IP block, then the budget, before the IP limit, and none of the three counts a hit", async () => {
    const ip = "198.51.100.250";
    const address = `0x${"ab".repeat(20)}`;
    const hits = async () => (await t.db.$client.unsafe<{ n: number }[]>("SELECT count(*)::int AS n FROM rate_limit_hits WHERE key = $1", [ip]))[0]!.n;
    const spent = { ...input(ip, address), budgetPerHour: 1 };
    await t.db.$client.unsafe("INSERT INTO sponsorship_budget_counts (shard, minute, created) VALUES (0, date_trunc('minute', now()), 1)");
    await t.db.$client.unsafe("INSERT INTO ip_blocks (cidr, reason, created_by) VALUES ('198.51.100.0/24', 'farm', 'admin:test')");
    await t.db.$client.unsafe(
      "INSERT INTO service_state (id, paused, pause_reason, paused_at) VALUES (1, true, 'refill', now()) ON CONFLICT (id) DO UPDATE SET paused = true, pause_reason = 'refill', paused_at = now()",
    );
    try {
      expect(await createRequestInDatabase(t.db, spent)).toEqual({ refusal: "sponsorships_paused" });
      await t.db.$client.unsafe("UPDATE service_state SET paused = false, pause_reason = NULL, paused_at = NULL WHERE id = 1");
      expect(await createRequestInDatabase(t.db, spent)).toEqual({ refusal: "ip_blocked" });
      await t.db.$client.unsafe("UPDATE ip_blocks SET lifted_at = now(), lifted_by = 'admin:test' WHERE cidr = '198.51.100.0/24'");
      expect(await createRequestInDatabase(t.db, spent)).toMatchObject({ refusal: "budget_exhausted", window: "hour" });
      expect(await hits()).toBe(0);
      // Past the three gates, the IP's check counts the hit of a request for a wallet never registered.
      expect(await createRequestInDatabase(t.db, input(ip, address))).toEqual({ refusal: "wallet_not_registered" });
      expect(await hits()).toBe(1);
    } finally {
      await t.db.$client.unsafe("UPDATE service_state SET paused = false, pause_reason = NULL, paused_at = NULL WHERE id = 1");
      await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
    }
  });
});

describe("the global budget at its edge", () => {
  /** `count` registered wallets, fresh. */
  async function wallets(count: number): Promise<string[]> {
    const addresses = Array.from({ length: count }, () => `0x${crypto.randomUUID().replaceAll("-", "")}${crypto.randomUUID().slice(0, 8)}`);
    await t.db.$client.unsafe("INSERT INTO wallets (wallet_address) SELECT unnest($1::text[])", [addresses]);
    return addresses;
  }

  it("takes the budget's lock only for a request that passed every limit: a refusal before that never waits for it", async () => {
    const [registeredWallet] = await wallets(1);
    const lock = await holdAdvisoryLock(t.db, "sponsorship_budget");
    try {
      // Near the end of a budget of 5 (exclusive): an unregistered wallet is refused at once, not behind the lock.
      expect(await createRequestInDatabase(t.db, { ...input("198.51.100.240", `0x${"cd".repeat(20)}`), budgetPerHour: 5 })).toEqual({
        refusal: "wallet_not_registered",
      });
      // A request that would be created waits for the place.
      const creation = createRequestInDatabase(t.db, { ...input("198.51.100.241", registeredWallet!), budgetPerHour: 5 });
      await expect(lock.blocks("the creation", creation)).resolves.toMatchObject({ outcome: "created" });
    } finally {
      await lock.end();
      await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
    }
  });

  it("holds no creation up behind another's wait for its client's lock, though that one was the first to read the minute's budget", async () => {
    const [waiting, other] = await wallets(2);
    await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
    // The web pool's limits: a lock waited for over 2 s fails the creation (a 503 in production).
    const pool = createDatabase(t.url, { max: 4, ...WEB_POOL_LIMITS });
    const lock = await holdAdvisoryLock(t.db, "sponsorship_ip:198.51.100.250");
    try {
      // The minute's first budget read, then the wait for its IP's lock (a flood from one address, a CGNAT); on a
      // connection without the web pool's lock timeout, so it waits for as long as the test holds the lock.
      const held = createRequestInDatabase(t.db, { ...input("198.51.100.250", waiting!), budgetPerHour: 100 });
      await lock.waitedFor("the first creation of the minute");
      // Before: this one's read waited on the first one's uncommitted row of the minute's sums, and failed at 2 s.
      expect(await createRequestInDatabase(pool, { ...input("198.51.100.251", other!), budgetPerHour: 100 })).toMatchObject({ outcome: "created" });
      await expect(lock.blocks("the first creation", held)).resolves.toMatchObject({ outcome: "created" });
      const kept = await t.db.$client.unsafe<{ n: number }[]>("SELECT count(*)::int AS n FROM sponsorship_budget_windows");
      expect(kept[0]!.n).toBeGreaterThanOrEqual(1);
    } finally {
      await lock.end();
      await closeDatabase(pool);
      await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
    }
  });

  it("admits exactly the budget from creations racing for its last places, first side by side, then one at a time", async () => {
    const bound = Number((await t.db.$client.unsafe<{ m: string }[]>("SELECT current_setting('max_connections') AS m"))[0]!.m);
    // 40 connections at once, as several web servers' pools would be, with the web pool's limits (a lock waited for
    // over 2 s would fail the creation: 503 in production).
    const pool = createDatabase(t.url, { max: 40, ...WEB_POOL_LIMITS });
    try {
      // Room for bound + 15: the first creations take the shared lock, the last places are taken one at a time.
      for (const [budget, extra] of [
        [bound + 15, 60],
        [10, 60],
      ] as const) {
        await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
        const addresses = await wallets(budget + extra);
        const outcomes = await Promise.all(
          addresses.map((address, i) =>
            createRequestInDatabase(pool, { ...input(`10.${Math.floor(i / 250)}.${i % 250}.${(budget % 200) + 1}`, address), budgetPerHour: budget }),
          ),
        );
        const created = outcomes.filter((o) => "outcome" in o && o.outcome === "created").length;
        const refused = outcomes.filter((o) => "refusal" in o && o.refusal === "budget_exhausted").length;
        // Before: every creation read the count before the others committed, and up to 40 passed the budget at once.
        expect({ budget, created, refused }).toEqual({ budget, created: budget, refused: extra });
      }
    } finally {
      await closeDatabase(pool);
      await t.db.$client.unsafe("TRUNCATE sponsorship_budget_counts, sponsorship_budget_windows");
    }
  });
});

describe("create_sponsorship_request's plans", () => {
  type IndexReads = Record<string, number>;
  const watched = ["sponsorship_requests_queue_idx", "sponsorship_requests_requested_at_idx", "sponsorship_requests_wallet_history_idx"];

  async function indexReads(connection: { unsafe: typeof t.db.$client.unsafe }): Promise<IndexReads> {
    await connection.unsafe("SELECT pg_stat_force_next_flush()");
    await connection.unsafe("SELECT pg_stat_clear_snapshot()");
    const rows = await connection.unsafe<{ name: string; reads: string }[]>(
      "SELECT indexrelname AS name, idx_tup_read::text AS reads FROM pg_stat_user_indexes WHERE indexrelname = ANY($1::text[])",
      [watched],
    );
    return Object.fromEntries(rows.map((r) => [r.name, Number(r.reads)]));
  }

  it("reads only the wallet's own requests, not the open queue or the replay window, with statistics older than the rows", async () => {
    const sql = t.db.$client;
    const prefix = crypto.randomUUID().replaceAll("-", "").slice(0, 8);
    const address = (kind: string, i: number) => `0x${prefix}${kind}${i.toString(16).padStart(31, "0")}`;
    // Statistics taken while every request was finished and old, as after a quiet night...
    await sql.begin(async (tx) => {
      await tx.unsafe("SET LOCAL session_replication_role = replica");
      await tx.unsafe(`INSERT INTO wallets (wallet_address) SELECT '0x${prefix}a' || lpad(to_hex(g), 31, '0') FROM generate_series(0, 199) g`);
      await tx.unsafe(
        `INSERT INTO sponsorship_requests (id, wallet_id, wallet_address, ip_address, status, requested_at, failed_at)
         SELECT gen_random_uuid(), w.id, w.wallet_address, '192.0.2.1', 'failed', now() - interval '1 day', now() - interval '1 day'
         FROM wallets w WHERE w.wallet_address LIKE '0x${prefix}a%'`,
      );
    });
    await sql.unsafe("ANALYZE sponsorship_requests");
    // ...then a busy hour: 400 open requests, all inside the replay window.
    await sql.unsafe(`INSERT INTO wallets (wallet_address) SELECT '0x${prefix}b' || lpad(to_hex(g), 31, '0') FROM generate_series(0, 400) g`);
    for (let i = 0; i < 400; i += 50) {
      const batch = Array.from({ length: 50 }, (_, k) => i + k);
      const results = await Promise.all(batch.map((n) => createRequestInDatabase(t.db, { ...input(`203.0.113.${n % 250}`, address("b", n)), ipLimit: 1000 })));
      expect(results.every((r) => "outcome" in r && r.outcome === "created")).toBe(true);
    }

    const connection = await sql.reserve();
    try {
      const before = await indexReads(connection);
      const [row] = await connection.unsafe<{ result: { outcome?: string } }[]>(
        "SELECT create_sponsorship_request($1::text, $2::text, $3::cidr, $4::text, $5::timestamptz, $6::int, $7::int, $8::timestamptz, " +
          "$9::timestamptz, $10::int, $11::text, $12::text, $13::uuid, $14::text, $15::text, $16::int, $17::int, $18::int, $19::timestamptz) AS result",
        (() => {
          const i = input("198.18.0.1", address("b", 400));
          return [
            i.ip,
            i.clientKey,
            i.clientNetwork,
            i.address,
            i.now.toISOString(),
            10,
            5,
            i.windowStart.toISOString(),
            i.replayStart.toISOString(),
            15,
            "ip",
            "wallet",
            i.requestId,
            null,
            null,
            0,
            0,
            16,
            null,
          ];
        })(),
      );
      expect(row!.result.outcome).toBe("created");
      const after = await indexReads(connection);
      const read = (name: string) => after[name]! - before[name]!;
      expect(read("sponsorship_requests_queue_idx")).toBe(0);
      expect(read("sponsorship_requests_requested_at_idx")).toBe(0);
      expect(read("sponsorship_requests_wallet_history_idx")).toBeLessThan(10);
    } finally {
      connection.release();
    }
  });
});
