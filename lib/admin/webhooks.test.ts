import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listAdminActions } from "@/db/queries/admin";
import { syncWebhookEndpoints } from "@/db/queries/webhooks";
import { signedInAdministrator } from "@/test/admin";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { sendTestWebhook, webhooksOverview } from "./webhooks";

/** The dashboard's webhooks page (issue 12 item 3): a test event per endpoint, audited; deliveries per endpoint. */

const ADMIN_TOKEN = "webhooks-test-admin-token-0123456789abcdefgh";
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const context = () => signedInAdministrator(t.db, ADMIN_TOKEN);

describe("send a test event", () => {
  it("writes nothing and audits nothing while no endpoint is configured", async () => {
    expect(await sendTestWebhook(t.db, await context())).toEqual({ eventId: undefined });
    expect((await listAdminActions(t.db, { limit: 50 })).filter((a) => a.action === "webhook_test")).toEqual([]);
  });

  it("writes a webhook.test delivery for every active endpoint, audited with the event, and lists them per endpoint", async () => {
    await syncWebhookEndpoints(t.db, ["https://a.example.org/hook", "https://b.example.org/hook"]);
    const { eventId } = await sendTestWebhook(t.db, await context());
    expect(eventId).toMatch(/^[0-9a-f-]{36}$/);
    const audit = (await listAdminActions(t.db, { limit: 50 })).filter((a) => a.action === "webhook_test");
    expect(audit.map((a) => a.subject)).toEqual([eventId]);
    const overview = await webhooksOverview(t.db);
    expect(overview.map((e) => [e.url, e.active, e.pending])).toEqual([
      ["https://a.example.org/hook", true, 1],
      ["https://b.example.org/hook", true, 1],
    ]);
    expect(overview[0]!.recent[0]).toMatchObject({ eventId, type: "webhook.test", status: "pending", attempts: 0, lastError: null });

    // An endpoint removed from WEBHOOK_URLS keeps its history, inactive, and gets no new event.
    await syncWebhookEndpoints(t.db, ["https://b.example.org/hook"]);
    await sendTestWebhook(t.db, await context());
    const after = await webhooksOverview(t.db);
    expect(after.map((e) => [e.url, e.active, e.pending])).toEqual([
      ["https://b.example.org/hook", true, 2],
      ["https://a.example.org/hook", false, 1],
    ]);
  });
});
