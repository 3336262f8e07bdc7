/**
 * The event types of the webhooks (decisions.md "Operators are told"), one list for the SQL that writes them
 * (db/functions/webhooks.sql), the worker that raises alerts and the dashboard.
 */

export const SPONSORSHIP_EVENT_TYPES = [
  "sponsorship.approved",
  "sponsorship.rejected",
  "sponsorship.relayed",
  "sponsorship.completed",
  "sponsorship.failed",
] as const;

export const ALERT_EVENT_TYPES = [
  "treasury.low",
  "relayer.out_of_gas",
  "fees.above_ceiling",
  "budget.exhausted",
  "sponsorships.paused",
  "sponsorships.resumed",
  "worker.down",
] as const;

/** Sent from the dashboard to check a receiver; not an event of the decisions, so receivers may ignore it. */
export const TEST_EVENT_TYPE = "webhook.test";

export type SponsorshipEventType = (typeof SPONSORSHIP_EVENT_TYPES)[number];
export type AlertEventType = (typeof ALERT_EVENT_TYPES)[number];
export type WebhookEventType = SponsorshipEventType | AlertEventType | typeof TEST_EVENT_TYPE;

export function isSponsorshipEventType(type: string): type is SponsorshipEventType {
  return (SPONSORSHIP_EVENT_TYPES as readonly string[]).includes(type);
}
