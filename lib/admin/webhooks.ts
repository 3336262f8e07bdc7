import type { Database } from "@/db/client";
import { insertAdminAction } from "@/db/queries/admin";
import { enqueueWebhookEvent, listEndpointDeliveries, type EndpointDeliveries } from "@/db/queries/webhooks";
import { TEST_EVENT_TYPE } from "@/lib/webhooks/events";
import type { AdminContext } from "./wallets";

/**
 * The dashboard's webhooks page (issue 12 item 3): recent deliveries per endpoint, and a test event an administrator
 * sends to check the receivers (audited with the event it wrote, in one transaction; the worker delivers it).
 */

/** Deliveries shown per endpoint. */
export const RECENT_DELIVERIES = 25;

export async function webhooksOverview(db: Database): Promise<EndpointDeliveries[]> {
  return listEndpointDeliveries(db, RECENT_DELIVERIES);
}

/** Writes a `webhook.test` event for every active endpoint; `eventId` undefined (and nothing audited) when there is none. */
export async function sendTestWebhook(db: Database, context: AdminContext): Promise<{ eventId: string | undefined }> {
  const now = context.now ?? new Date();
  return db.transaction(async (tx) => {
    const eventId = await enqueueWebhookEvent(tx, TEST_EVENT_TYPE, { message: "A test event sent from the dashboard", sentAt: now.toISOString() });
    if (eventId) {
      await insertAdminAction(tx, { action: "webhook_test", subject: eventId, sessionId: context.session.id, ipAddress: context.ipAddress, createdAt: now });
    }
    return { eventId };
  });
}
