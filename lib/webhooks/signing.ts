import { Webhook } from "standardwebhooks";

/**
 * Signs a webhook as the Standard Webhooks specification (decisions.md "Operators are told"), with the
 * specification's reference implementation: `webhook-signature` is `v1,` + base64 of HMAC-SHA256 over
 * `id.timestamp.body`, keyed with the secret's decoded bytes (the `whsec_` prefix is not part of the key).
 */

export type WebhookHeaders = { "webhook-id": string; "webhook-timestamp": string; "webhook-signature": string };

export function signWebhook(secret: string, input: { id: string; body: string; at: Date }): WebhookHeaders {
  const signature = new Webhook(secret).sign(input.id, input.at, input.body);
  return {
    "webhook-id": input.id,
    "webhook-timestamp": String(Math.floor(input.at.getTime() / 1000)),
    "webhook-signature": signature,
  };
}
