import type { RequestTimes } from "@/db/queries/request-times";
import {
  observeFeeCeiling,
  observeRequestFinished,
  observeWorkerStep,
  recordRelayAttempt,
  recordRelayConfirmed,
  recordRelayFailure,
  type RelayFailureKind,
} from "@/lib/metrics";

/**
 * The worker's metric events (lib/metrics, served on METRICS_PORT + 1): one call per event, never throwing, so
 * metrics can never stop a stage.
 */

function safely(fn: () => void): void {
  try {
    fn();
  } catch {
    // Metrics are best effort.
  }
}

export const metrics = {
  attempt: (relayer: string, attempt: number) => safely(() => recordRelayAttempt({ relayer, attempt })),
  failure: (relayer: string, kind: RelayFailureKind) => safely(() => recordRelayFailure({ relayer, kind })),
  confirmed: (relayer: string) => safely(() => recordRelayConfirmed({ relayer })),
  finished: (requests: readonly (RequestTimes | undefined)[]) =>
    safely(() => {
      for (const r of requests) if (r) observeRequestFinished(r);
    }),
  step: (stage: string, seconds: number, items: number) => safely(() => observeWorkerStep({ stage, seconds, items })),
  feeCeiling: (input: { ceilingWei: bigint; baseFeeWei: bigint; aboveCeiling: boolean }) => safely(() => observeFeeCeiling(input)),
};
