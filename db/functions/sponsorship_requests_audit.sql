-- The audit trail of sponsorship requests and the webhook outbox of their transitions, in one row trigger. This file
-- is the function's one current source (db/migrate.ts applies db/functions/ after the migrations): it replaces the
-- function of migration 0001, whose trigger (AFTER INSERT OR UPDATE OF status) stays as it was.
--
-- Audit (interface-spec 3.1, decisions.md): every status a request takes is a request_events row, with the actor and
-- reason the writer set in status_actor / status_reason; the creation's row carries the request's own time.
--
-- Webhooks (decisions.md "Operators are told", db/functions/webhooks.sql): the five transitions after creation are
-- written to the outbox in the same transaction, as a snapshot of the request as it is now (without ip_address,
-- user_agent and client_key: they never enter the outbox), its wallet and its relay attempts.
-- lib/webhooks/payload.ts turns it into the record of GET /sponsorship/:id (db/queries/webhooks.test.ts proves they
-- agree). With no active endpoint (WEBHOOK_URLS empty) nothing is written. Done here rather than in a trigger of its
-- own: a second row trigger cost a trigger call per status change (three per sponsorship) for nothing when no
-- endpoint is configured (docs/performance.md, "Session 6: cuts").
CREATE OR REPLACE FUNCTION sponsorship_requests_audit() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason, created_at)
    VALUES (NEW.id, NULL, NEW.status, NEW.status_actor, NEW.status_reason, NEW.requested_at);
    RETURN NULL;
  END IF;
  IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
    RETURN NULL;
  END IF;
  INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason)
  VALUES (NEW.id, OLD.status, NEW.status, NEW.status_actor, NEW.status_reason);
  IF NEW.status NOT IN ('approved', 'rejected', 'relayed', 'completed', 'failed')
     OR NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE active) THEN
    RETURN NULL;
  END IF;
  PERFORM webhook_enqueue('sponsorship.' || NEW.status, jsonb_build_object(
    'request', to_jsonb(NEW) - 'ip_address' - 'user_agent' - 'client_key',
    'wallet', (
      SELECT jsonb_build_object('id', w.id, 'walletAddress', w.wallet_address, 'sponsorshipCount', w.sponsorship_count,
        'isBlocked', EXISTS (
          SELECT 1 FROM blocks b WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address
            AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > now())))
      FROM wallets w WHERE w.id = NEW.wallet_id),
    'relayTransactions', coalesce((
      SELECT jsonb_agg(jsonb_build_object('id', t.id, 'status', t.status, 'relay_attempt', t.relay_attempt,
        'transaction_hash', t.transaction_hash, 'submitted_at', t.submitted_at, 'confirmed_at', t.confirmed_at,
        'failed_at', t.failed_at, 'failure_reason', t.failure_reason) ORDER BY t.relay_attempt)
      FROM relay_transactions t WHERE t.sponsorship_request_id = NEW.id), '[]'::jsonb)
  ), NEW.id);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
