-- Wake-ups: every new sponsorship request notifies the workers at once (decisions.md "Pipeline": the worker polls
-- every WORKER_INTERVAL_MS and may also be woken early). The payload is the request id; workers LISTEN on
-- 'sponsorship_wakeup' and treat any notification as "look at the queue now".
CREATE OR REPLACE FUNCTION sponsorship_requests_notify_wakeup() RETURNS trigger AS $$
BEGIN
  PERFORM pg_notify('sponsorship_wakeup', NEW.id::text);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER sponsorship_requests_notify_wakeup
  AFTER INSERT ON sponsorship_requests
  FOR EACH ROW EXECUTE FUNCTION sponsorship_requests_notify_wakeup();
--> statement-breakpoint
-- Nonce fills follow the relay transitions (queued -> submitted -> confirmed | failed, failed -> confirmed when a
-- given-up fill is the one mined) and keep their hash once recorded: the same guard as relay_transactions.
CREATE TRIGGER relayer_nonce_fills_guard_transition
  BEFORE UPDATE ON relayer_nonce_fills
  FOR EACH ROW EXECUTE FUNCTION relay_transactions_guard_transition();
