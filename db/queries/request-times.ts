import type { RequestStatus } from "@/db/schema";
import type { Row } from "@/db/sql/run";

/** The parse of a statement whose rows nobody reads. */
export const none = (): undefined => undefined;

/** A request's status and timestamps after a change (for the worker's stage metrics). */
export type RequestTimes = {
  id: string;
  status: RequestStatus;
  requestedAt: Date;
  approvedAt: Date | null;
  rejectedAt: Date | null;
  relayedAt: Date | null;
  completedAt: Date | null;
  failedAt: Date | null;
};
type RequestTimesRow = {
  id: string;
  status: RequestStatus;
  requested_at: Date | string;
  approved_at: Date | string | null;
  rejected_at: Date | string | null;
  relayed_at: Date | string | null;
  completed_at: Date | string | null;
  failed_at: Date | string | null;
};
export const TIMES = "r.id, r.status, r.requested_at, r.approved_at, r.rejected_at, r.relayed_at, r.completed_at, r.failed_at";
const date = (v: Date | string | null) => (v === null ? null : new Date(v));
export const toTimes = (row: Row): RequestTimes => {
  const r = row as RequestTimesRow;
  return {
    id: r.id,
    status: r.status,
    requestedAt: new Date(r.requested_at),
    approvedAt: date(r.approved_at),
    rejectedAt: date(r.rejected_at),
    relayedAt: date(r.relayed_at),
    completedAt: date(r.completed_at),
    failedAt: date(r.failed_at),
  };
};
