-- The audit trail of sponsorship requests and the webhook outbox of their transitions, written once per statement.
-- This file is the one current source of the function and its two triggers (db/migrate.ts applies db/functions/
-- after the migrations): they replace the row trigger of migration 0001.
--
-- Audit (interface-spec 3.1, decisions.md): every status a request takes is a request_events row, with the actor and
-- reason the writer set in status_actor / status_reason; the creation's row carries the request's own time.
--
-- Webhooks (decisions.md "Operators are told", db/functions/webhooks.sql): the five transitions after creation are
-- written to the outbox in the same transaction, as a snapshot of the request as it is now (without ip_address,
-- user_agent and client_key: they never enter the outbox), its wallet and its relay attempts.
-- lib/webhooks/payload.ts turns it into the record of GET /sponsorship/:id (worker/webhooks.test.ts proves they
-- agree, for a delivered sponsorship.completed; db/request-audit.test.ts that the snapshot leaves ip_address out).
-- With no active endpoint (WEBHOOK_URLS empty) nothing is written.
--
-- Per statement, from its transition tables (issue 15, docs/performance.md "Session 6: cuts"): the worker moves its
-- batches in one UPDATE each, and one INSERT ... SELECT of their audit rows costs a quarter less of the backend's CPU
-- than a trigger call and an INSERT per row; the webhook outbox is looked at once per statement, not in a trigger of
-- its own per row.
CREATE OR REPLACE FUNCTION sponsorship_requests_audit() RETURNS trigger AS $$
DECLARE
  r record;
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason, created_at)
    SELECT n.id, NULL, n.status, n.status_actor, n.status_reason, n.requested_at FROM new_rows n;
    RETURN NULL;
  END IF;
  -- An UPDATE that changed no row's status writes nothing.
  INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason)
  SELECT n.id, o.status, n.status, n.status_actor, n.status_reason
  FROM new_rows n JOIN old_rows o ON o.id = n.id
  WHERE n.status IS DISTINCT FROM o.status;
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE active) THEN
    RETURN NULL;
  END IF;
  -- A build from before this trigger, started after this one (a rollback, or instances upgraded one at a time),
  -- re-creates its own row trigger for the outbox (sponsorship_requests_webhook). While it is there it announces the
  -- transitions and this one does not, so none is announced twice; the next start of this build drops it again.
  IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'sponsorship_requests'::regclass AND tgname = 'sponsorship_requests_webhook') THEN
    RETURN NULL;
  END IF;
  FOR r IN
    SELECT n.* FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.status IS DISTINCT FROM o.status AND n.status IN ('approved', 'rejected', 'relayed', 'completed', 'failed')
  LOOP
    PERFORM webhook_enqueue('sponsorship.' || r.status, jsonb_build_object(
      'request', to_jsonb(r) - 'ip_address' - 'user_agent' - 'client_key',
      'wallet', (
        SELECT jsonb_build_object('id', w.id, 'walletAddress', w.wallet_address, 'sponsorshipCount', w.sponsorship_count,
          'isBlocked', EXISTS (
            SELECT 1 FROM blocks b WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address
              AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > now())))
        FROM wallets w WHERE w.id = r.wallet_id),
      'relayTransactions', coalesce((
        SELECT jsonb_agg(jsonb_build_object('id', t.id, 'status', t.status, 'relay_attempt', t.relay_attempt,
          'transaction_hash', t.transaction_hash, 'submitted_at', t.submitted_at, 'confirmed_at', t.confirmed_at,
          'failed_at', t.failed_at, 'failure_reason', t.failure_reason) ORDER BY t.relay_attempt)
        FROM relay_transactions t WHERE t.sponsorship_request_id = r.id), '[]'::jsonb)
    ), r.id);
  END LOOP;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

-- Transition tables take one event per trigger: one for INSERT, one for UPDATE (any UPDATE: a trigger with transition
-- tables takes no column list; rows whose status did not change are skipped above). The row triggers they replace
-- (migration 0001's audit, the first webhook trigger) are dropped in the same transaction as the new ones are created
-- (db/migrate.ts installs all of db/functions/ in one), so no status change is ever audited or announced twice.
DROP TRIGGER IF EXISTS sponsorship_requests_audit ON sponsorship_requests;
DROP TRIGGER IF EXISTS sponsorship_requests_webhook ON sponsorship_requests;
DROP FUNCTION IF EXISTS sponsorship_requests_webhook();

CREATE OR REPLACE TRIGGER sponsorship_requests_audit_insert
  AFTER INSERT ON sponsorship_requests
  REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION sponsorship_requests_audit();

CREATE OR REPLACE TRIGGER sponsorship_requests_audit_update
  AFTER UPDATE ON sponsorship_requests
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION sponsorship_requests_audit();
