import type { Database } from "@/db/client";
import { claimDueDeliveries, settleDelivery, type ClaimedDelivery } from "@/db/queries/webhooks";
import type { Logger } from "@/lib/log";
import { webhookBody } from "./payload";
import { signWebhook } from "./signing";
import { withoutUrl } from "@/lib/redact-url";

/**
 * Delivers the outbox (decisions.md "Operators are told"): a `POST` per (event, endpoint), signed, answered `2xx`
 * within `timeoutMs` (10 s) or retried with exponential backoff and jitter until `retryForMs` (24 h) have passed since
 * the event; the same `webhook-id` (the event's id) on every attempt. Each endpoint has its own loop, so a dead or
 * slow endpoint delays no other. Deliveries are claimed with FOR UPDATE SKIP LOCKED and leased while in flight, so
 * several dispatchers (workers) never send one at the same time, and one that dies mid-attempt is retried by another.
 */

export type DispatcherSettings = {
  /** A delivery is an answer 2xx within this (decisions: 10 s). */
  timeoutMs: number;
  /** Backoff after the first failed attempt; doubles with each attempt, up to `maxDelayMs`, with jitter. */
  baseDelayMs: number;
  maxDelayMs: number;
  /** A delivery is retried until this long after its event, then given up (decisions: at least 24 hours). */
  retryForMs: number;
  /** How often an idle endpoint looks for due deliveries (besides the NOTIFY of new events). */
  pollMs: number;
  /** Deliveries claimed (and sent concurrently) per pass of one endpoint. */
  batchSize: number;
};

export const DEFAULT_DISPATCHER_SETTINGS: DispatcherSettings = {
  timeoutMs: 10_000,
  baseDelayMs: 5_000,
  maxDelayMs: 3_600_000,
  retryForMs: 24 * 3_600_000,
  pollMs: 1_000,
  batchSize: 20,
};

/** The wait before attempt `attempts + 1`: base × 2^(attempts-1), capped, "equal jitter" (half fixed, half random). */
export function retryDelayMs(attempts: number, settings: Pick<DispatcherSettings, "baseDelayMs" | "maxDelayMs">, random: () => number = Math.random): number {
  const full = Math.min(settings.maxDelayMs, settings.baseDelayMs * 2 ** Math.min(Math.max(attempts - 1, 0), 40));
  return Math.round(full / 2 + random() * (full / 2));
}

/**
 * How long to wait before trying again after a failed attempt of a delivery first due `ageMs` ago; undefined when
 * the retry window has passed (given up). The age is the database's, so no clock of this process is compared with it.
 */
export function retryInMs(delivery: Pick<ClaimedDelivery, "attempts" | "ageMs">, settings: DispatcherSettings): number | undefined {
  if (delivery.ageMs >= settings.retryForMs) return undefined;
  return retryDelayMs(delivery.attempts, settings);
}

type Outcome = { delivered: boolean; statusCode: number | null; error: string | null };

/** One attempt: POST, 2xx within the timeout is a delivery; redirects are not followed (not a 2xx). */
export async function postWebhook(url: string, headers: Record<string, string>, body: string, timeoutMs: number, stop?: AbortSignal): Promise<Outcome> {
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "user-agent": "gas-sponsorship-webhooks", ...headers },
      body,
      redirect: "manual",
      signal: stop ? AbortSignal.any([AbortSignal.timeout(timeoutMs), stop]) : AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel().catch(() => {});
    if (res.status >= 200 && res.status < 300) return { delivered: true, statusCode: res.status, error: null };
    return { delivered: false, statusCode: res.status, error: `answered ${res.status}` };
  } catch (error) {
    const e = error as Error & { cause?: { code?: string; message?: string } };
    const message =
      e.name === "TimeoutError"
        ? `no answer within ${timeoutMs} ms`
        : stop?.aborted
          ? "interrupted: the process stopped"
          : (e.cause?.code ?? e.cause?.message ?? e.message);
    // Stored and shown on the dashboard: the endpoint's path and query, which may hold its token, never.
    return { delivered: false, statusCode: null, error: withoutUrl(String(message), url).slice(0, 500) };
  }
}

export class WebhookDispatcher {
  private stopping = false;
  /** Aborts attempts in flight at stop (they are settled as failed and retried): a stop never waits for a slow receiver. */
  private readonly halt = new AbortController();
  private readonly loops: Promise<void>[] = [];
  private readonly sleepers = new Map<string, () => void>();
  private readonly settings: DispatcherSettings;

  constructor(private readonly options: { db: Database; endpoints: readonly string[]; secret: string; log: Logger; settings?: Partial<DispatcherSettings> }) {
    this.settings = { ...DEFAULT_DISPATCHER_SETTINGS, ...options.settings };
  }

  start(): void {
    for (const endpoint of this.options.endpoints) this.loops.push(this.run(endpoint));
  }

  /** New events were written (NOTIFY): every endpoint looks at once. */
  wake(): void {
    for (const resolve of this.sleepers.values()) resolve();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.halt.abort();
    this.wake();
    await Promise.all(this.loops);
  }

  /** One pass for one endpoint: claims its due deliveries, sends them, settles each. Returns how many were sent. */
  async deliverDue(endpoint: string): Promise<number> {
    const { db, secret, log } = this.options;
    const s = this.settings;
    // The lease outlasts the attempt (its timeout) with room to settle it.
    const claimed = await claimDueDeliveries(db, { endpoint, limit: s.batchSize, leaseMs: s.timeoutMs + 20_000 });
    await Promise.all(
      claimed.map(async (d) => {
        const started = performance.now();
        let outcome: Outcome;
        try {
          const body = webhookBody(d);
          const headers = signWebhook(secret, { id: d.eventId, body, at: new Date() });
          outcome = await postWebhook(endpoint, headers, body, s.timeoutMs, this.halt.signal);
        } catch (error) {
          // Nothing was sent (an event whose body cannot be rendered): a failed attempt like any other, retried and
          // given up on the schedule. Left unsettled, its claim would run out and it would be claimed again for ever.
          outcome = { delivered: false, statusCode: null, error: `not sent: ${error instanceof Error ? error.message : String(error)}`.slice(0, 500) };
        }
        // The age at the claim, plus the attempt's own time.
        const retryIn = outcome.delivered ? undefined : retryInMs({ attempts: d.attempts, ageMs: d.ageMs + (performance.now() - started) }, s);
        await settleDelivery(db, { id: d.id, attempts: d.attempts, ...outcome, retryInMs: retryIn });
        const fields = { endpoint: new URL(endpoint).origin, eventId: d.eventId, type: d.type, attempt: d.attempts, statusCode: outcome.statusCode };
        if (outcome.delivered) log.debug("webhook delivered", fields);
        else if (retryIn !== undefined) log.info("webhook attempt failed; retrying", { ...fields, error: outcome.error, retryInMs: retryIn });
        else log.warn("webhook given up after the retry window", { ...fields, error: outcome.error });
      }),
    );
    return claimed.length;
  }

  private async run(endpoint: string): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      let sent = 0;
      try {
        sent = await this.deliverDue(endpoint);
        failures = 0;
      } catch (error) {
        failures++;
        this.options.log.warn("webhook deliveries failed (database?); retrying", {
          endpoint: new URL(endpoint).origin,
          error: error instanceof Error ? error.message : String(error),
        });
      }
      if (sent > 0 || this.stopping) continue;
      const waitMs = failures > 0 ? Math.min(10_000, this.settings.pollMs * 2 ** failures) : this.settings.pollMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, waitMs);
        function done() {
          clearTimeout(timer);
          resolve();
        }
        this.sleepers.set(endpoint, done);
      });
      this.sleepers.delete(endpoint);
    }
  }
}
