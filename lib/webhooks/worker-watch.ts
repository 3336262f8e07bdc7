import type { Database } from "@/db/client";
import { newestHeartbeat, registerWebhookEndpoints, reportAlert } from "@/db/queries/webhooks";
import type { Logger } from "@/lib/log";
import { WebhookDispatcher, type DispatcherSettings } from "./dispatcher";

/**
 * `worker.down` (decisions.md "Operators are told": no live worker heartbeat for 60 s). No worker can report its
 * own absence, and when the only worker is down no other is there to notice, so the web server watches
 * (server.ts, only when WEBHOOK_URLS is set): every `intervalMs` it reads the newest heartbeat; once none has been
 * written for `downAfterMs` (counting from this watch's start when there is none at all) the alert starts (once,
 * through webhook_report_alert, however many web servers watch), and it ends when a heartbeat written after it
 * started is seen. The web server registers its WEBHOOK_URLS too (registerWebhookEndpoints): with no worker yet,
 * nobody else would. While no worker lives, nobody else would deliver the outbox, so the watch delivers what is due
 * itself (the same dispatcher and claims as the workers: no delivery is sent twice at once).
 */

export const WORKER_DOWN_AFTER_MS = 60_000;

export type WorkerWatchOptions = {
  db: Database;
  log: Logger;
  endpoints: readonly string[];
  secret: string;
  downAfterMs?: number;
  intervalMs?: number;
  dispatcher?: Partial<DispatcherSettings>;
};

export class WorkerWatch {
  /** When a worker was last alive, on the monotonic clock (performance.now()): the heartbeat's age is the database's. */
  private lastAliveAt: number | undefined;
  /** The newest heartbeat seen, as the database stored it. */
  private lastBeatAt: Date | undefined;
  private readonly startedAt = performance.now();
  /** Whether this watch's endpoints are registered (at its first look that reached the database). */
  private registered = false;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private readonly dispatcher: WebhookDispatcher;
  private readonly downAfterMs: number;

  constructor(private readonly options: WorkerWatchOptions) {
    this.downAfterMs = options.downAfterMs ?? WORKER_DOWN_AFTER_MS;
    this.dispatcher = new WebhookDispatcher({
      db: options.db,
      endpoints: options.endpoints,
      secret: options.secret,
      log: options.log,
      settings: options.dispatcher,
    });
  }

  /** One look: starts or ends `worker.down`; while down, delivers what is due. Returns whether the workers are down. */
  check(): Promise<boolean> {
    const run = (async () => {
      const { db, log } = this.options;
      if (!this.registered) {
        await registerWebhookEndpoints(db, this.options.endpoints);
        this.registered = true;
      }
      const lookedAt = performance.now(); // what the read below says was so at least from here on
      const beat = await newestHeartbeat(db);
      // The silence is measured on a monotonic clock from the heartbeat's age, which the database gives: on the
      // wall clock, a step back of this server's (NTP, a restored VM) kept the last beat in the future, and no
      // worker.down was sent for the length of the step.
      const now = performance.now();
      if (beat) {
        this.lastAliveAt = Math.max(this.lastAliveAt ?? -Infinity, now - beat.ageMs);
        this.lastBeatAt = beat.lastBeatAt;
      }
      const since = this.lastAliveAt ?? this.startedAt;
      const silentForMs = Math.round(now - since);
      const down = silentForMs >= this.downAfterMs;
      const lastHeartbeatAt = this.lastBeatAt?.toISOString() ?? null;
      // Not down yet is evidence only of a heartbeat seen, as old as it is: a watch that started a moment ago and has
      // seen none knows nothing (another web server may have watched for longer), and ends nothing.
      const started =
        down || this.lastAliveAt !== undefined
          ? await reportAlert(db, {
              key: "worker.down",
              type: "worker.down",
              active: down,
              data: { lastHeartbeatAt, silentForMs },
              observedAgeMs: down ? performance.now() - lookedAt : silentForMs,
            })
          : false;
      if (started) log.error("alert: no live worker heartbeat", { silentForMs });
      if (down) for (const endpoint of this.options.endpoints) await this.dispatcher.deliverDue(endpoint);
      return down;
    })();
    return run;
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.checking) return; // the last look is still running (a slow receiver)
      this.checking = this.check()
        .then(
          () => undefined,
          (error: unknown) => this.options.log.warn("worker watch failed", { error: error instanceof Error ? error.message : String(error) }),
        )
        .finally(() => (this.checking = undefined));
    }, this.options.intervalMs ?? 15_000);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.checking;
    await this.dispatcher.stop();
  }
}
