import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";

/**
 * The audit trail and the webhook outbox of a request's status changes are written by one statement-level trigger
 * (db/functions/sponsorship_requests_audit.sql): a status change runs the transition guard (per row) and that
 * trigger (once per statement), and nothing else, whether or not a webhook endpoint is configured (issue 15,
 * docs/performance.md "Session 6: cuts").
 */

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

type Session = { unsafe: (text: string, params?: never[]) => Promise<Record<string, unknown>[]> };

/** A pending request of a fresh wallet. */
async function pendingRequest(c: Session): Promise<string> {
  const address = `0x${randomUUID().replace(/-/g, "")}${"0".repeat(8)}`;
  const [w] = await c.unsafe(`INSERT INTO wallets (wallet_address) VALUES ('${address}') RETURNING id`);
  const [r] = await c.unsafe(
    `INSERT INTO sponsorship_requests (wallet_id, wallet_address, ip_address) VALUES ('${String(w!.id)}', '${address}', '10.0.0.1') RETURNING id`,
  );
  return String(r!.id);
}

/** Calls of SQL functions (triggers included) made by `body` in one session, by PostgreSQL's statistics. */
async function functionCalls(body: (c: Session) => Promise<void>): Promise<Record<string, number>> {
  const c = await t.db.$client.reserve();
  try {
    await c.unsafe("SET track_functions = 'all'");
    const read = async () => {
      await c.unsafe("SELECT pg_stat_force_next_flush()");
      await c.unsafe("SELECT pg_stat_clear_snapshot()");
      const rows = await c.unsafe<{ funcname: string; calls: string }[]>(`SELECT funcname, calls::text FROM pg_stat_user_functions`);
      return new Map(rows.map((r) => [r.funcname, Number(r.calls)]));
    };
    const session = c as unknown as Session;
    const before = await read();
    await body(session);
    const after = await read();
    const calls: Record<string, number> = {};
    for (const [name, n] of after) if (n - (before.get(name) ?? 0) > 0) calls[name] = n - (before.get(name) ?? 0);
    return calls;
  } finally {
    c.release();
  }
}

describe("a request's status change", () => {
  it("runs the transition guard and one audit trigger, and no other function, when no webhook endpoint is active", async () => {
    const id = await pendingRequest(t.db.$client as unknown as Session);
    const calls = await functionCalls(async (c) => {
      await c.unsafe(`UPDATE sponsorship_requests SET status = 'approved', approved_at = now(), status_actor = 'worker' WHERE id = '${id}'`);
    });
    expect(calls).toEqual({ sponsorship_requests_guard_transition: 1, sponsorship_requests_audit: 1 });
    const events = await t.db.$client.unsafe(`SELECT from_status, to_status, actor FROM request_events WHERE sponsorship_request_id = '${id}' ORDER BY id`);
    expect(events.map((e) => `${String(e.from_status)}->${String(e.to_status)} ${String(e.actor)}`)).toEqual(["null->pending api", "pending->approved worker"]);
    const [outbox] = await t.db.$client.unsafe(`SELECT count(*)::int AS n FROM webhook_events WHERE sponsorship_request_id = '${id}'`);
    expect(outbox!.n).toBe(0);
  });

  it("writes the audit rows of a batch moved by one UPDATE with one trigger call, one row per request whose status changed", async () => {
    const c = t.db.$client as unknown as Session;
    const ids = [await pendingRequest(c), await pendingRequest(c), await pendingRequest(c)];
    const list = ids.map((id) => `'${id}'`).join(", ");
    const calls = await functionCalls(async (s) => {
      await s.unsafe(
        `UPDATE sponsorship_requests SET status = 'approved', approved_at = now(), status_actor = 'worker', status_reason = 'eligible' WHERE id IN (${list})`,
      );
      // No status changed: no audit row.
      await s.unsafe(`UPDATE sponsorship_requests SET available_at = now() WHERE id IN (${list})`);
    });
    expect(calls).toEqual({ sponsorship_requests_guard_transition: 6, sponsorship_requests_audit: 2 });
    const events = await t.db.$client.unsafe(
      `SELECT sponsorship_request_id AS id, from_status, to_status, actor, reason FROM request_events WHERE sponsorship_request_id IN (${list}) AND from_status IS NOT NULL`,
    );
    expect(events.map((e) => `${String(e.id)} ${String(e.from_status)}->${String(e.to_status)} ${String(e.actor)} ${String(e.reason)}`).sort()).toEqual(
      ids.map((id) => `${id} pending->approved worker eligible`).sort(),
    );
  });

  it("writes its audit row and, with an active endpoint, one outbox event with a delivery, from the same trigger", async () => {
    const c = t.db.$client;
    await c.unsafe(`INSERT INTO webhook_endpoints (url) VALUES ('https://hooks.example/audit-test')`);
    try {
      const id = await pendingRequest(c as unknown as Session);
      const calls = await functionCalls(async (s) => {
        await s.unsafe(
          `UPDATE sponsorship_requests SET status = 'rejected', rejected_at = now(), status_actor = 'worker', status_reason = 'wallet_blocked' WHERE id = '${id}'`,
        );
      });
      expect(calls).toEqual({ sponsorship_requests_guard_transition: 1, sponsorship_requests_audit: 1, webhook_enqueue: 1 });
      const events = await c.unsafe(`SELECT to_status, reason FROM request_events WHERE sponsorship_request_id = '${id}' ORDER BY id`);
      expect(events.map((e) => `${String(e.to_status)} ${String(e.reason)}`)).toEqual(["pending null", "rejected wallet_blocked"]);
      const outbox = await c.unsafe(
        `SELECT e.type, e.data -> 'request' ->> 'status' AS status, e.data -> 'request' ? 'ip_address' AS has_ip, d.endpoint
         FROM webhook_events e JOIN webhook_deliveries d ON d.event_id = e.id WHERE e.sponsorship_request_id = '${id}'`,
      );
      expect(outbox).toEqual([{ type: "sponsorship.rejected", status: "rejected", has_ip: false, endpoint: "https://hooks.example/audit-test" }]);
    } finally {
      await c.unsafe(`DELETE FROM webhook_endpoints WHERE url = 'https://hooks.example/audit-test'`);
    }
  });

  it("leaves the outbox to an older build's row trigger while one is there (a rollback, or instances upgraded one at a time): each transition announced once", async () => {
    const c = t.db.$client;
    await c.unsafe(`INSERT INTO webhook_endpoints (url) VALUES ('https://hooks.example/mixed-builds')`);
    // What db/functions/webhooks.sql of the builds before the statement-level trigger creates on every start.
    await c.unsafe(`
      CREATE FUNCTION sponsorship_requests_webhook() RETURNS trigger AS $$
      BEGIN
        IF NEW.status NOT IN ('approved', 'rejected', 'relayed', 'completed', 'failed') OR NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE active) THEN
          RETURN NULL;
        END IF;
        PERFORM webhook_enqueue('sponsorship.' || NEW.status, jsonb_build_object('request', to_jsonb(NEW) - 'ip_address' - 'user_agent' - 'client_key'), NEW.id);
        RETURN NULL;
      END;
      $$ LANGUAGE plpgsql;
      CREATE TRIGGER sponsorship_requests_webhook AFTER UPDATE OF status ON sponsorship_requests
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION sponsorship_requests_webhook();`);
    try {
      const id = await pendingRequest(c as unknown as Session);
      await c.unsafe(
        `UPDATE sponsorship_requests SET status = 'rejected', rejected_at = now(), status_actor = 'worker', status_reason = 'wallet_blocked' WHERE id = '${id}'`,
      );
      const outbox = await c.unsafe(`SELECT type FROM webhook_events WHERE sponsorship_request_id = '${id}'`);
      expect(outbox.map((e) => String(e.type))).toEqual(["sponsorship.rejected"]);
    } finally {
      await c.unsafe(`DROP TRIGGER sponsorship_requests_webhook ON sponsorship_requests; DROP FUNCTION sponsorship_requests_webhook()`);
      await c.unsafe(`DELETE FROM webhook_endpoints WHERE url = 'https://hooks.example/mixed-builds'`);
    }
  });
});
