import { sql } from "drizzle-orm";
import { run, type Executor } from "@/db/sql/run";
import type { RelaySummaryView } from "./sponsorship-requests";
import { isoUtc } from "@/db/sql/fragments";

export type RelayView = RelaySummaryView & { sponsorshipRequestId: string };

export async function findRelayView(db: Executor, id: string): Promise<RelayView | undefined> {
  const rows = await run<RelayView>(
    db,
    sql`
    SELECT t.id, t.sponsorship_request_id AS "sponsorshipRequestId", t.status, t.relay_attempt AS "relayAttempt",
      t.transaction_hash AS "transactionHash",
      ${isoUtc(sql`t.submitted_at`)} AS "submittedAt",
      ${isoUtc(sql`t.confirmed_at`)} AS "confirmedAt",
      ${isoUtc(sql`t.failed_at`)} AS "failedAt",
      t.failure_reason AS "failureReason"
    FROM relay_transactions t WHERE t.id = ${id}`,
  );
  return rows[0];
}
