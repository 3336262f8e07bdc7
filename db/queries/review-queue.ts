import type { Address } from "viem";
import type { EligibilityReason } from "@/db/schema";
import { query, type Query } from "@/db/sql/run";
import { TIMES, toTimes, type RequestTimes } from "./request-times";

/**
 * The review stage's queue operations (decisions.md "Pipeline"): claim pending requests, apply the decisions. Each
 * status change sets status_actor and status_reason (the audit trigger copies them) and is guarded by
 * `WHERE status = <from>`; the triggers of migration 0001 refuse any illegal move anyway.
 */

export type PendingRequestClaim = {
  id: string;
  walletAddress: Address;
  /** An administrator or automatic block is active for the wallet, by the database's clock. */
  blocked: boolean;
};

/**
 * Claims up to `limit` pending requests that are due, oldest first, locking them until the transaction ends
 * (`FOR UPDATE SKIP LOCKED`: another worker skips them instead of waiting). The block check rides along, on the
 * database's clock as the decisions' re-check below (until session 25 on the worker's: a worker clock behind the
 * others kept an expired automatic block active, and rejected a request the API had accepted).
 */
const CLAIM_PENDING = `
    SELECT r.id, r.wallet_address,
      EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = r.wallet_address AND b.lifted_at IS NULL
          AND (b.expires_at IS NULL OR b.expires_at > statement_timestamp())
      ) AS blocked
    FROM sponsorship_requests r
    WHERE r.status = 'pending' AND r.available_at <= now()
    ORDER BY r.requested_at, r.id
    LIMIT $1::int
    FOR UPDATE OF r SKIP LOCKED`;

export function claimPendingRequests(limit: number): Query<PendingRequestClaim[]> {
  return query(CLAIM_PENDING, [limit], (rows) =>
    (rows as { id: string; wallet_address: string; blocked: boolean }[]).map((r) => ({
      id: r.id,
      walletAddress: r.wallet_address as Address,
      blocked: r.blocked,
    })),
  );
}

export type ReviewDecision = { id: string; status: "approved" | "rejected"; reason: EligibilityReason };

/**
 * pending -> approved | rejected, with the eligibility reason. Returns the requests moved. An approval whose wallet
 * was blocked after the claim read it (review's chain calls run in between) is written as a `wallet_blocked`
 * rejection: the block is read again here, under the claim's row locks.
 */
const APPLY_REVIEW = `
    UPDATE sponsorship_requests r SET
      status = d.status::request_status,
      eligibility_reason = d.reason::eligibility_reason,
      approved_at = CASE WHEN d.status = 'approved' THEN now() ELSE r.approved_at END,
      rejected_at = CASE WHEN d.status = 'rejected' THEN now() ELSE r.rejected_at END,
      status_actor = $4,
      status_reason = d.reason
    FROM (
      SELECT v.id,
        CASE WHEN blocked THEN 'rejected' ELSE v.status END AS status,
        CASE WHEN blocked THEN 'wallet_blocked' ELSE v.reason END AS reason
      FROM unnest($1::uuid[], $2::text[], $3::text[]) AS v(id, status, reason)
      JOIN sponsorship_requests w ON w.id = v.id
      CROSS JOIN LATERAL (SELECT v.status = 'approved' AND EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address AND b.lifted_at IS NULL
          AND (b.expires_at IS NULL OR b.expires_at > statement_timestamp())) AS blocked) x
    ) d
    WHERE r.id = d.id AND r.status = 'pending'
    RETURNING ${TIMES}`;

export function applyReviewDecisions(decisions: readonly ReviewDecision[], actor: string): Query<RequestTimes[]> {
  return query(APPLY_REVIEW, [decisions.map((d) => d.id), decisions.map((d) => d.status), decisions.map((d) => d.reason), actor], (rows) => rows.map(toTimes));
}
