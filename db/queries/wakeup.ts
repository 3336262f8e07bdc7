import type { Database } from "../client";

/**
 * Worker wake-ups (docs/worker.md, "Wake-ups"): a new request is announced with `NOTIFY sponsorship_wakeup`, which
 * every worker LISTENs to; workers also poll every WORKER_INTERVAL_MS, so a lost wake-up only delays.
 *
 * Sent after the creation commits, in a statement of its own, and coalesced per pool: while one NOTIFY is on its
 * way, further calls set a flag and one more NOTIFY follows it, so every creation is followed by a NOTIFY that
 * started after its commit, and a burst of creations costs a few notifications, not one each. Not a trigger inside
 * the creation transaction: PostgreSQL serialises the commits of all transactions that NOTIFY (a database-wide
 * lock held until the commit record is flushed), which halved the rate of concurrent creations (docs/performance.md).
 */

export const WAKEUP_CHANNEL = "sponsorship_wakeup";

type WakeState = { inFlight: boolean; again: boolean };
const states = new WeakMap<Database, WakeState>();

/** Wakes the workers soon; never throws (a failure goes to `onError`, the workers' poll covers it). */
export function wakeWorkers(db: Database, onError: (error: unknown) => void): void {
  let state = states.get(db);
  if (!state) {
    state = { inFlight: false, again: false };
    states.set(db, state);
  }
  if (state.inFlight) {
    state.again = true;
    return;
  }
  const current = state;
  current.inFlight = true;
  db.$client`SELECT pg_notify(${WAKEUP_CHANNEL}, '')`.then(
    () => finish(),
    (error: unknown) => {
      onError(error);
      finish();
    },
  );
  function finish(): void {
    current.inFlight = false;
    if (current.again) {
      current.again = false;
      wakeWorkers(db, onError);
    }
  }
}
