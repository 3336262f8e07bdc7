-- Legal status transitions and the audit trail, enforced by the database (interface-spec 3.1: "Transitions are
-- strictly enforced; no other move is allowed. Terminal states never change.").

CREATE OR REPLACE FUNCTION sponsorship_requests_guard_transition() RETURNS trigger AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    IF NOT (
      (OLD.status = 'pending'  AND NEW.status IN ('approved', 'rejected')) OR
      (OLD.status = 'approved' AND NEW.status = 'relayed') OR
      (OLD.status = 'relayed'  AND NEW.status IN ('completed', 'failed'))
    ) THEN
      RAISE EXCEPTION 'illegal sponsorship request transition % -> % for %', OLD.status, NEW.status, OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  IF NEW.wallet_id IS DISTINCT FROM OLD.wallet_id OR NEW.requested_at IS DISTINCT FROM OLD.requested_at
     OR NEW.wallet_address IS DISTINCT FROM OLD.wallet_address THEN
    RAISE EXCEPTION 'sponsorship request % identity columns are immutable', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER sponsorship_requests_guard_transition
  BEFORE UPDATE ON sponsorship_requests
  FOR EACH ROW EXECUTE FUNCTION sponsorship_requests_guard_transition();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION sponsorship_requests_audit() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason, created_at)
    VALUES (NEW.id, NULL, NEW.status, NEW.status_actor, NEW.status_reason, NEW.requested_at);
  ELSIF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO request_events (sponsorship_request_id, from_status, to_status, actor, reason)
    VALUES (NEW.id, OLD.status, NEW.status, NEW.status_actor, NEW.status_reason);
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER sponsorship_requests_audit
  AFTER INSERT OR UPDATE OF status ON sponsorship_requests
  FOR EACH ROW EXECUTE FUNCTION sponsorship_requests_audit();
--> statement-breakpoint
CREATE OR REPLACE FUNCTION relay_transactions_guard_transition() RETURNS trigger AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    -- failed -> confirmed: an attempt given up as stuck and replaced can still be the one that is mined.
    IF NOT (
      (OLD.status = 'queued'    AND NEW.status IN ('submitted', 'failed')) OR
      (OLD.status = 'submitted' AND NEW.status IN ('confirmed', 'failed')) OR
      (OLD.status = 'failed'    AND NEW.status = 'confirmed')
    ) THEN
      RAISE EXCEPTION 'illegal relay transition % -> % for %', OLD.status, NEW.status, OLD.id
        USING ERRCODE = 'check_violation';
    END IF;
  END IF;
  IF OLD.transaction_hash IS NOT NULL AND NEW.transaction_hash IS DISTINCT FROM OLD.transaction_hash THEN
    RAISE EXCEPTION 'relay % transaction hash is immutable once recorded', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END;
$$ LANGUAGE plpgsql;
--> statement-breakpoint
CREATE TRIGGER relay_transactions_guard_transition
  BEFORE UPDATE ON relay_transactions
  FOR EACH ROW EXECUTE FUNCTION relay_transactions_guard_transition();
