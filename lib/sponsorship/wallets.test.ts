import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/db/client";
import * as schema from "@/db/schema";
import { findWalletView } from "@/db/queries/wallets";
import { parseConfig } from "@/lib/config";
import { holdAdvisoryLock } from "@/test/advisory-lock";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { SponsorshipError } from "./errors";
import { registerIpLockKey } from "./lock-keys";
import { registerWallet } from "./wallets";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const configWithLimit = (limit: number) =>
  parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", REGISTER_LIMIT_IP_PER_HOUR: String(limit) });
const randomAddress = () => `0x${crypto.randomUUID().replaceAll("-", "")}${crypto.randomUUID().replaceAll("-", "").slice(0, 8)}` as `0x${string}`;
let nextIp = 1;
/** A client address of its own for each test (TEST-NET-2). */
const freshIp = () => `198.51.100.${nextIp++}`;

async function hitsOf(clientKey: string): Promise<number> {
  const rows = await t.db.$client.unsafe<{ n: number }[]>("SELECT count(*)::int AS n FROM rate_limit_hits WHERE scope = 'register_ip' AND key = $1", [
    clientKey,
  ]);
  return rows[0]!.n;
}

/** Locks some session of this database is waiting for (advisory or on a table). */
async function waitingLocks(connection: { unsafe: TestDatabase["db"]["$client"]["unsafe"] } = t.db.$client): Promise<number> {
  const rows = await connection.unsafe<{ n: number }[]>(
    "SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
  );
  return rows[0]!.n;
}

describe("registerWallet", () => {
  it("is one statement per registration (register_wallet: no BEGIN, no COMMIT, one round trip), whatever the outcome", async () => {
    const sent: string[] = [];
    const client = postgres(t.url, { max: 1, onnotice: () => {}, debug: (_connection, query) => sent.push(query) });
    const db = drizzle({ client, schema }) as Database;
    try {
      // The connection is opened first (postgres.js reads the server's array types when it connects).
      await client.unsafe("SELECT 1");
      const ip = freshIp();
      const config = configWithLimit(2);
      const address = randomAddress();
      const outcomes: string[] = [];
      const attempt = async (walletAddress: `0x${string}`, from: string) => {
        sent.length = 0;
        try {
          const { created } = await registerWallet(db, { walletAddress, ip: from }, { config });
          outcomes.push(created ? "created" : "again");
        } catch (error) {
          outcomes.push(error instanceof SponsorshipError ? error.code : String(error));
        }
        expect(sent, `${outcomes.at(-1)}: ${sent.join(" / ")}`).toHaveLength(1);
        expect(sent[0]).toMatch(/^SELECT register_wallet\(/);
      };
      await attempt(address, ip);
      await attempt(address, ip);
      await attempt(randomAddress(), ip);
      const blockedIp = freshIp();
      await t.db.$client.unsafe("INSERT INTO ip_blocks (cidr, reason, created_by) VALUES ($1::cidr, 'test', 'test')", [`${blockedIp}/32`]);
      await attempt(randomAddress(), blockedIp);
      expect(outcomes).toEqual(["created", "again", "rate_limited", "ip_blocked"]);
    } finally {
      await client.end({ timeout: 5 });
    }
  });

  it("admits exactly the limit when registrations of one client identity arrive together at the limit", async () => {
    const ip = freshIp();
    const limit = 5;
    const config = configWithLimit(limit);
    // A holder keeps every registration from counting (SHARE blocks INSERT, not SELECT) until all the pool's
    // connections are busy with one: whichever read its count before, each must then see the hits of those admitted
    // before it. Without the identity's lock held from the count to the commit, the 10 in flight all read 0 and all
    // would be admitted.
    // The holder has a connection of its own (ending it rolls its transaction back), so the pool's 10 all register.
    const holder = postgres(t.url, { max: 1, onnotice: () => {} });
    let attempts: Promise<PromiseSettledResult<unknown>[]> | undefined;
    try {
      await holder.unsafe("BEGIN");
      await holder.unsafe("LOCK TABLE rate_limit_hits IN SHARE MODE");
      attempts = Promise.allSettled(Array.from({ length: 30 }, () => registerWallet(t.db, { walletAddress: randomAddress(), ip }, { config })));
      const deadline = Date.now() + 10_000;
      while ((await waitingLocks(holder)) < 10) {
        if (Date.now() > deadline) throw new Error("the registrations never all waited");
        await new Promise((resolve) => setImmediate(resolve));
      }
      await holder.unsafe("COMMIT");
    } finally {
      await holder.end({ timeout: 5 });
    }
    const settled = await attempts;
    const refused = settled.filter((a): a is PromiseRejectedResult => a.status === "rejected");
    expect(settled.filter((a) => a.status === "fulfilled")).toHaveLength(limit);
    expect(refused.map((r) => (r.reason as SponsorshipError).code)).toEqual(Array(30 - limit).fill("rate_limited"));
    // A refused registration counts nothing.
    expect(await hitsOf(ip)).toBe(limit);
  });

  it("waits for the identity's advisory lock under the key of lib/sponsorship/lock-keys.ts", async () => {
    // The SQL function spells the key itself; this proves it is registerIpLockKey's.
    const ip = freshIp();
    const lock = await holdAdvisoryLock(t.db, registerIpLockKey(ip));
    try {
      const call = registerWallet(t.db, { walletAddress: randomAddress(), ip }, { config: configWithLimit(10) });
      await expect(lock.blocks("the registration", call)).resolves.toMatchObject({ created: true });
    } finally {
      await lock.end();
    }
  });

  it("answers the wallet exactly as GET /wallets/:address shows it, a blocked wallet included", async () => {
    const config = configWithLimit(10);
    const at = new Date("2030-03-01T12:00:00.123Z");
    const address = randomAddress();
    const first = await registerWallet(t.db, { walletAddress: address, ip: freshIp() }, { config, now: at });
    expect(first.wallet).toEqual(await findWalletView(t.db, address, at));
    await t.db.$client.unsafe(
      "INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at) VALUES ('wallet', $1, 'admin', 'test', 'test', $2::timestamptz)",
      [address, at.toISOString()],
    );
    const later = new Date(at.getTime() + 1_000);
    const again = await registerWallet(t.db, { walletAddress: address, ip: freshIp() }, { config, now: later });
    expect(again.created).toBe(false);
    expect(again.wallet).toMatchObject({ isBlocked: true, lastSeenAt: "2030-03-01T12:00:01.123Z", firstSeenAt: "2030-03-01T12:00:00.123Z" });
    expect(again.wallet).toEqual(await findWalletView(t.db, address, later));
  });

  it("answers Retry-After until the hit that reached the limit leaves the rolling hour", async () => {
    const ip = freshIp();
    const config = configWithLimit(2);
    const t0 = new Date("2030-04-01T00:00:00.000Z");
    await registerWallet(t.db, { walletAddress: randomAddress(), ip }, { config, now: t0 });
    await registerWallet(t.db, { walletAddress: randomAddress(), ip }, { config, now: new Date(t0.getTime() + 600_000) });
    // 20 minutes after the first: the window holds 2 (the limit); it has room again when the older of them (t0)
    // leaves it, at t0 + 60 min, 40 minutes from now.
    const refused = registerWallet(t.db, { walletAddress: randomAddress(), ip }, { config, now: new Date(t0.getTime() + 1_200_000) });
    await expect(refused).rejects.toMatchObject({ code: "rate_limited", retryAfterSeconds: 2_400 });
    expect(await hitsOf(ip)).toBe(2);
  });
});
