import type { RequestDetailView } from "@/db/queries/sponsorship-requests";
import { isSponsorshipEventType } from "./events";

/**
 * The body of a webhook: `{"type", "timestamp", "data"}` (decisions.md "Operators are told"). A `sponsorship.*`
 * event's data is the record of GET /sponsorship/:id without `ipAddress` and `userAgent`, as it was when the
 * status changed: built here from the snapshot the audit trigger took (db/functions/sponsorship_requests_audit.sql),
 * field for field the shape of RequestDetailView (worker/webhooks.test.ts compares a delivered `sponsorship.completed`
 * event's data with the record of GET /sponsorship/:id).
 */

export type WebhookRequestRecord = Omit<RequestDetailView, "ipAddress" | "userAgent">;

type Snapshot = {
  request: Record<string, unknown>;
  wallet: RequestDetailView["wallet"];
  relayTransactions: Record<string, unknown>[];
};

/** A timestamptz from to_jsonb (`2026-11-22T10:00:00.123+00:00`) in the wire format, null kept. */
function wireTime(value: unknown): string | null {
  return typeof value === "string" ? new Date(value).toISOString() : null;
}

const text = (value: unknown): string | null => (typeof value === "string" ? value : null);

export function requestRecordFromSnapshot(snapshot: Snapshot): WebhookRequestRecord {
  const r = snapshot.request;
  return {
    id: String(r.id),
    walletId: String(r.wallet_id),
    walletAddress: String(r.wallet_address),
    status: r.status as WebhookRequestRecord["status"],
    requestedAt: wireTime(r.requested_at)!,
    approvedAt: wireTime(r.approved_at),
    rejectedAt: wireTime(r.rejected_at),
    completedAt: wireTime(r.completed_at),
    failedAt: wireTime(r.failed_at),
    eligibilityReason: (r.eligibility_reason ?? null) as WebhookRequestRecord["eligibilityReason"],
    wallet: snapshot.wallet,
    relayTransactions: snapshot.relayTransactions.map((t) => ({
      id: String(t.id),
      status: t.status as WebhookRequestRecord["relayTransactions"][number]["status"],
      relayAttempt: Number(t.relay_attempt),
      transactionHash: text(t.transaction_hash),
      submittedAt: wireTime(t.submitted_at),
      confirmedAt: wireTime(t.confirmed_at),
      failedAt: wireTime(t.failed_at),
      failureReason: text(t.failure_reason),
    })),
  };
}

/** The exact bytes that are signed and sent. */
export function webhookBody(event: { type: string; occurredAt: string; data: Record<string, unknown> }): string {
  const data = isSponsorshipEventType(event.type) ? requestRecordFromSnapshot(event.data as Snapshot) : event.data;
  return JSON.stringify({ type: event.type, timestamp: event.occurredAt, data });
}
