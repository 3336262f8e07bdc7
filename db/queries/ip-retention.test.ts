import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { closeDatabase, createDatabase } from "@/db/client";
import { removeExpiredPersonalData, removeExpiredPersonalDataBatch } from "@/db/queries/ip-retention";
import type { RequestStatus } from "@/db/schema";
import { WEB_POOL_LIMITS } from "@/lib/http/app-context";
import { createTestDatabase, type TestDatabase } from "@/test/db";

/**
 * IP_RETENTION_DAYS (db/queries/ip-retention.ts) on a real PostgreSQL: past the retention the personal data goes and
 * the records stay. Every row is written as its writer would, with times relative to the database's clock (the one
 * the retention reads). A database per test: a pass acts on the whole database.
 */

let t: TestDatabase;
beforeEach(async () => {
  t = await createTestDatabase();
});
afterEach(async () => t?.drop());

const DAYS = 90;
const sql = () => t.db.$client;
const ago = (days: number) => sql()`now() - ${days}::float8 * interval '1 day'`;

async function request(status: RequestStatus, daysAgo: number): Promise<string> {
  const address = `0x${randomBytes(20).toString("hex")}`;
  const [wallet] = await sql()<{ id: string }[]>`INSERT INTO wallets (wallet_address) VALUES (${address}) RETURNING id`;
  const at = ago(daysAgo);
  const after = (statuses: RequestStatus[]) => (statuses.includes(status) ? at : null);
  const [row] = await sql()<{ id: string }[]>`
    INSERT INTO sponsorship_requests (wallet_id, wallet_address, status, eligibility_reason, ip_address, client_key, user_agent,
      requested_at, approved_at, rejected_at, relayed_at, completed_at, failed_at, failure_reason, status_actor, status_reason)
    VALUES (${wallet!.id}, ${address}, ${status}, ${status === "pending" ? null : status === "rejected" ? "wallet_blocked" : "eligible"},
      '2001:db8:5:6::7', '2001:db8:5:6::/64', 'retention-test/1.0', ${at},
      ${after(["approved", "relayed", "completed", "failed"])}, ${after(["rejected"])}, ${after(["relayed", "completed", "failed"])},
      ${after(["completed"])}, ${after(["failed"])}, ${status === "failed" ? "not mined" : null}, 'worker:test', 'test')
    RETURNING id`;
  return row!.id;
}

/** Every column but updated_at (the transition guard sets it on every UPDATE). */
async function requestRow(id: string): Promise<Record<string, unknown>> {
  const [row] = await sql()<{ row: Record<string, unknown> }[]>`SELECT to_jsonb(r) - 'updated_at' AS row FROM sponsorship_requests r WHERE id = ${id}`;
  return row!.row;
}

const withoutPersonalData = (row: Record<string, unknown>) => ({ ...row, ip_address: null, client_key: null, user_agent: null });

async function session(ended: { expiredDaysAgo?: number; revokedDaysAgo?: number; expiresInHours?: number }): Promise<string> {
  const expires = ended.expiredDaysAgo !== undefined ? ago(ended.expiredDaysAgo) : sql()`now() + ${ended.expiresInHours ?? 12}::float8 * interval '1 hour'`;
  const revoked = ended.revokedDaysAgo !== undefined ? ago(ended.revokedDaysAgo) : null;
  const [row] = await sql()<{ id: string }[]>`
    INSERT INTO admin_sessions (token_hash, credential, created_at, expires_at, revoked_at, ip_address, user_agent)
    VALUES (${randomBytes(32).toString("hex")}, 'credential', ${expires} - interval '12 hours', ${expires}, ${revoked}, '203.0.113.9', 'Firefox/140')
    RETURNING id`;
  return row!.id;
}

async function sessionRow(id: string) {
  const [row] = await sql()<{ ipAddress: string | null; userAgent: string | null; tokenHash: string; revokedAt: Date | null }[]>`
    SELECT ip_address AS "ipAddress", user_agent AS "userAgent", token_hash AS "tokenHash", revoked_at AS "revokedAt" FROM admin_sessions WHERE id = ${id}`;
  return row!;
}

async function action(name: string, daysAgo: number, details: Record<string, unknown> = {}): Promise<number> {
  const [row] = await sql()<{ id: number }[]>`
    INSERT INTO admin_actions (action, subject, reason, ip_address, details, created_at)
    VALUES (${name}, 'subject', 'reason', '198.51.100.23', ${JSON.stringify(details)}::jsonb, ${ago(daysAgo)})
    RETURNING id`;
  return row!.id;
}

async function actionRow(id: number) {
  const [row] = await sql()<{ row: Record<string, unknown> }[]>`SELECT to_jsonb(a) - 'created_at' AS row FROM admin_actions a WHERE id = ${id}`;
  return row!.row;
}

type BlockInput = { subjectType: "ip" | "wallet"; kind: "automatic" | "admin"; createdDaysAgo: number; expiresDaysAgo?: number; liftedDaysAgo?: number };

async function block(input: BlockInput): Promise<string> {
  const subject = input.subjectType === "ip" ? "198.51.100.23" : `0x${randomBytes(20).toString("hex")}`;
  const [row] = await sql()<{ id: string }[]>`
    INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at, lifted_at, lifted_by)
    VALUES (${input.subjectType}, ${subject}, ${input.kind}, 'test', 'rate_limiter', ${ago(input.createdDaysAgo)},
      ${input.expiresDaysAgo === undefined ? null : ago(input.expiresDaysAgo)},
      ${input.liftedDaysAgo === undefined ? null : ago(input.liftedDaysAgo)}, ${input.liftedDaysAgo === undefined ? null : "admin:test"})
    RETURNING id`;
  return row!.id;
}

async function blockIds(): Promise<string[]> {
  return (await sql()<{ id: string }[]>`SELECT id FROM blocks ORDER BY id`).map((r) => r.id).sort();
}

const MINUTES_15 = 15 / (24 * 60);

describe("IP retention (IP_RETENTION_DAYS)", () => {
  it("removes IP address, client key and User-Agent from requests that ended and were made more than N days ago, and nothing else", async () => {
    const old = [await request("completed", DAYS + 1), await request("rejected", DAYS + 30), await request("failed", 400)];
    const young = [await request("completed", DAYS - 1), await request("failed", 10), await request("rejected", 0)];
    const before = new Map(await Promise.all([...old, ...young].map(async (id) => [id, await requestRow(id)] as const)));
    const [{ events }] = (await sql()`SELECT count(*)::int AS events FROM request_events`) as unknown as [{ events: number }];

    const removed = await removeExpiredPersonalData(t.db, { retentionDays: DAYS });

    expect(removed).toEqual({ requests: 3, adminSessions: 0, adminActions: 0, automaticIpBlocks: 0 });
    for (const id of old) expect(await requestRow(id)).toEqual(withoutPersonalData(before.get(id)!));
    for (const id of young) expect(await requestRow(id)).toEqual(before.get(id));
    // Not a status change: no audit row.
    expect((await sql()`SELECT count(*)::int AS events FROM request_events`)[0]).toEqual({ events });
    // Done once: a second pass finds nothing.
    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).requests).toBe(0);
  });

  it("keeps the IP of open requests however old (pending, approved, relayed): their limits and replay read it", async () => {
    const open = [await request("pending", 400), await request("approved", 200), await request("relayed", DAYS + 1)];
    const before = await Promise.all(open.map(requestRow));

    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).requests).toBe(0);

    expect(await Promise.all(open.map(requestRow))).toEqual(before);
    expect(before.every((row) => row.ip_address === "2001:db8:5:6::7" && row.client_key && row.user_agent)).toBe(true);
  });

  it("removes the IP and User-Agent of administrator sessions that ended (expired or revoked) more than N days ago", async () => {
    const expired = await session({ expiredDaysAgo: DAYS + 1 });
    const revoked = await session({ expiresInHours: 12, revokedDaysAgo: DAYS + 2 });
    const active = await session({ expiresInHours: 6 });
    const recentlyExpired = await session({ expiredDaysAgo: DAYS - 1 });
    const recentlyRevoked = await session({ expiresInHours: 1, revokedDaysAgo: 3 });
    const beforeRevoked = await sessionRow(revoked);

    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).adminSessions).toBe(2);

    expect(await sessionRow(expired)).toMatchObject({ ipAddress: null, userAgent: null });
    expect(await sessionRow(revoked)).toEqual({ ...beforeRevoked, ipAddress: null, userAgent: null });
    for (const id of [active, recentlyExpired, recentlyRevoked])
      expect(await sessionRow(id)).toMatchObject({ ipAddress: "203.0.113.9", userAgent: "Firefox/140" });
  });

  it("removes the IP address, and the User-Agent a sign-in keeps in details, from administrator actions older than N days", async () => {
    const failed = await action("sign_in_failed", DAYS + 1, { userAgent: "curl/8", channel: "metrics" });
    const signIn = await action("sign_in", 365, { userAgent: null });
    const pause = await action("pause", DAYS + 5);
    const recent = await action("sign_in_failed", DAYS - 1, { userAgent: "curl/8", channel: "sign_in" });
    const before = { failed: await actionRow(failed), pause: await actionRow(pause), recent: await actionRow(recent) };

    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).adminActions).toBe(3);

    expect(await actionRow(failed)).toEqual({ ...before.failed, ip_address: null, details: { channel: "metrics" } });
    expect(await actionRow(signIn)).toMatchObject({ action: "sign_in", ip_address: null, details: {} });
    expect(await actionRow(pause)).toEqual({ ...before.pause, ip_address: null });
    expect(await actionRow(recent)).toEqual(before.recent);
  });

  it("deletes automatic IP blocks that ended more than N days ago, and keeps wallet blocks and IP blocks still in force or ended since", async () => {
    const expired = await block({ subjectType: "ip", kind: "automatic", createdDaysAgo: DAYS + 1, expiresDaysAgo: DAYS + 1 - MINUTES_15 });
    const lifted = await block({ subjectType: "ip", kind: "automatic", createdDaysAgo: 100, expiresDaysAgo: 100 - MINUTES_15, liftedDaysAgo: 100 });
    const kept = [
      await block({ subjectType: "ip", kind: "automatic", createdDaysAgo: DAYS - 1, expiresDaysAgo: DAYS - 1 - MINUTES_15 }),
      await block({ subjectType: "ip", kind: "automatic", createdDaysAgo: 0, expiresDaysAgo: -MINUTES_15 }),
      await block({ subjectType: "wallet", kind: "automatic", createdDaysAgo: 400, expiresDaysAgo: 400 - MINUTES_15 }),
      await block({ subjectType: "wallet", kind: "admin", createdDaysAgo: 400 }),
      await block({ subjectType: "wallet", kind: "admin", createdDaysAgo: 400, liftedDaysAgo: 300 }),
    ];
    expect(await blockIds()).toEqual([expired, lifted, ...kept].sort());

    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).automaticIpBlocks).toBe(2);

    expect(await blockIds()).toEqual([...kept].sort());
  });

  it("keeps everything with IP_RETENTION_DAYS=0", async () => {
    const rows = [await request("completed", 3650), await request("failed", 1000)];
    const before = await Promise.all(rows.map(requestRow));
    const expired = await session({ expiredDaysAgo: 3650 });
    const failed = await action("sign_in_failed", 3650, { userAgent: "curl/8", channel: "sign_in" });
    const beforeAction = await actionRow(failed);
    await block({ subjectType: "ip", kind: "automatic", createdDaysAgo: 3650, expiresDaysAgo: 3650 - MINUTES_15 });
    const blocksBefore = await blockIds();

    expect(await removeExpiredPersonalData(t.db, { retentionDays: 0 })).toEqual({ requests: 0, adminSessions: 0, adminActions: 0, automaticIpBlocks: 0 });

    expect(await Promise.all(rows.map(requestRow))).toEqual(before);
    expect(await sessionRow(expired)).toMatchObject({ ipAddress: "203.0.113.9", userAgent: "Firefox/140" });
    expect(await actionRow(failed)).toEqual(beforeAction);
    expect(await blockIds()).toEqual(blocksBefore);
  });

  it("changes at most `batch` rows per statement, and a pass repeats statements until none is left", async () => {
    for (let i = 0; i < 25; i++) await request("completed", DAYS + 1 + i);
    // How many rows each UPDATE statement on the table changed, as a statement trigger sees it.
    await sql().unsafe(`
      CREATE TABLE retention_statements (id serial PRIMARY KEY, rows int NOT NULL);
      CREATE FUNCTION retention_statement_rows() RETURNS trigger AS $$
      BEGIN INSERT INTO retention_statements (rows) SELECT count(*) FROM new_rows; RETURN NULL; END; $$ LANGUAGE plpgsql;
      CREATE TRIGGER retention_statement_rows AFTER UPDATE ON sponsorship_requests
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION retention_statement_rows();`);

    expect(await removeExpiredPersonalDataBatch(t.db, "requests", DAYS, 4)).toBe(4);
    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS, batch: 10 })).requests).toBe(21);

    const statements = (await sql()<{ rows: number }[]>`SELECT rows FROM retention_statements ORDER BY id`).map((r) => r.rows);
    expect(statements).toEqual([4, 10, 10, 1]);
    const [left] = await sql()<{ n: number }[]>`SELECT count(*)::int AS n FROM sponsorship_requests WHERE ip_address IS NOT NULL`;
    expect(left!.n).toBe(0);
  });

  it("skips a row another transaction holds instead of waiting for it, and removes it at a later pass", async () => {
    const held = await request("completed", DAYS + 10);
    const free = await request("rejected", DAYS + 10);
    const other = await sql().reserve();
    try {
      await other`BEGIN`;
      await other`SELECT 1 FROM sponsorship_requests WHERE id = ${held} FOR UPDATE`;
      // The web server's pool, whose lock_timeout (2 s) a pass that waited for the row would run into.
      const web = createDatabase(t.url, { max: 1, ...WEB_POOL_LIMITS });
      try {
        expect((await removeExpiredPersonalData(web, { retentionDays: DAYS })).requests).toBe(1);
      } finally {
        await closeDatabase(web);
      }
      expect((await requestRow(free)).ip_address).toBeNull();
      expect((await requestRow(held)).ip_address).not.toBeNull();
      await other`COMMIT`;
    } finally {
      other.release();
    }
    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS })).requests).toBe(1);
    expect((await requestRow(held)).ip_address).toBeNull();
  });

  it("shares the work between passes run at once: each row removed once, every row removed", async () => {
    for (let i = 0; i < 40; i++) await request(i % 2 === 0 ? "completed" : "failed", DAYS + 1 + i);
    for (let i = 0; i < 12; i++) await action("sign_in_failed", DAYS + 1 + i, { userAgent: "curl/8", channel: "sign_in" });

    const passes = await Promise.all([1, 2, 3].map(() => removeExpiredPersonalData(t.db, { retentionDays: DAYS, batch: 5 })));

    expect(passes.reduce((sum, p) => sum + p.requests, 0)).toBe(40);
    expect(passes.reduce((sum, p) => sum + p.adminActions, 0)).toBe(12);
    const [left] = await sql()<{ requests: number; actions: number }[]>`
      SELECT (SELECT count(*)::int FROM sponsorship_requests WHERE ip_address IS NOT NULL OR user_agent IS NOT NULL OR client_key IS NOT NULL) AS requests,
        (SELECT count(*)::int FROM admin_actions WHERE ip_address IS NOT NULL OR details ? 'userAgent') AS actions`;
    expect(left).toEqual({ requests: 0, actions: 0 });
  });

  it("stops between statements once its signal is aborted", async () => {
    for (let i = 0; i < 6; i++) await request("completed", DAYS + 1 + i);
    const stop = new AbortController();
    stop.abort();
    expect((await removeExpiredPersonalData(t.db, { retentionDays: DAYS, batch: 2, signal: stop.signal })).requests).toBe(0);
    const [left] = await sql()<{ n: number }[]>`SELECT count(*)::int AS n FROM sponsorship_requests WHERE ip_address IS NOT NULL`;
    expect(left!.n).toBe(6);
  });
});
