-- Webhooks' transactional outbox (decisions.md "Operators are told"; docs/webhooks.md). This file is the one current
-- source of these functions and triggers: db/migrate.ts applies it after the migrations (CREATE OR REPLACE).
--
-- Every event is written by webhook_enqueue in the transaction of the change it announces: a request's status
-- change (the audit trigger, db/functions/sponsorship_requests_audit.sql), the pause and its end (trigger on
-- service_state), an alert starting (webhook_alert), a test event from the dashboard. A crash after the commit loses nothing; a rollback sends nothing. With no active
-- endpoint (WEBHOOK_URLS empty) nothing is written at all. The worker delivers (lib/webhooks/dispatcher.ts).

-- Writes one event and one delivery per active endpoint; NULL (and nothing written) when no endpoint is active.
CREATE OR REPLACE FUNCTION webhook_enqueue(p_type text, p_data jsonb, p_request_id uuid DEFAULT NULL)
RETURNS uuid AS $$
DECLARE
  v_id uuid;
  v_seq bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE active) THEN
    RETURN NULL;
  END IF;
  INSERT INTO webhook_events (type, sponsorship_request_id, data) VALUES (p_type, p_request_id, p_data)
  RETURNING id, seq INTO v_id, v_seq;
  INSERT INTO webhook_deliveries (event_id, endpoint, sponsorship_request_id, event_seq)
  SELECT v_id, e.url, p_request_id, v_seq FROM webhook_endpoints e WHERE e.active;
  -- Wakes the dispatchers at commit (they poll too).
  PERFORM pg_notify('webhook_events', '');
  RETURN v_id;
END;
$$ LANGUAGE plpgsql;

-- A five-argument webhook_alert with a default (a build of this revision before its release) would make the calls
-- of the four-argument one below ambiguous.
DROP FUNCTION IF EXISTS webhook_alert(text, text, boolean, jsonb, bigint);

-- An alert (treasury.low, fees.above_ceiling, ...): p_active true while its condition holds, as observed
-- p_observed_age_ms ago (a worker's treasury read can be a minute old; a web server's last heartbeat seen). The event
-- is written only when the alert starts (no row, or the row is inactive); it starts again only after it ended. It
-- ends once its condition has been seen clear for p_clear_ms: from the first clear observation after the last one
-- that saw it hold (clear_since), to a clear report that much later; any observation of it holding in between
-- starts that over. So a condition that hovers at its threshold (a rolling budget freeing a slot and taking it again
-- seconds later, a base fee moving around the ceiling block by block, two workers reading fees from two endpoints)
-- is one episode, not one event per crossing. 0: the first clear observation ends it. Several processes report the
-- same alert, each from what it last saw: only an observation made after the alert started ends it, and only one
-- made after it ended starts it again, so one process's older reading cannot end and restart another's episode (each
-- restart a new event). It starts only when its event is written: with no active endpoint it stays unstarted, and is
-- started (and sent) by the first report after an endpoint is added (the endpoints read FOR SHARE: none can be
-- deactivated between the check and the event). The row lock of the upsert orders concurrent callers: two workers
-- never both start it. Returns whether this call started it.
CREATE OR REPLACE FUNCTION webhook_report_alert(p_key text, p_type text, p_active boolean, p_data jsonb, p_observed_age_ms bigint, p_clear_ms bigint)
RETURNS boolean AS $$
DECLARE
  v_started boolean := false;
  -- Both rounded to the columns' milliseconds, as a stored clear_since is: compared unrounded, a clear_since rounded
  -- up was later than the very report that set it, and a clear time of 0 ended nothing. An observation in the
  -- millisecond of a start or an end counts as after it.
  v_observed_at timestamptz(3) := now() - make_interval(secs => greatest(coalesce(p_observed_age_ms, 0), 0) / 1000.0);
  v_now timestamptz(3) := now();
BEGIN
  IF p_active THEN
    -- Seen holding after a clear spell began: the spell is over.
    UPDATE alert_state SET clear_since = NULL, updated_at = now()
    WHERE key = p_key AND active AND clear_since IS NOT NULL AND clear_since <= v_observed_at;
    PERFORM 1 FROM webhook_endpoints WHERE active FOR SHARE;
    IF NOT FOUND THEN
      RETURN false;
    END IF;
    INSERT INTO alert_state AS a (key, type, active, since, data, updated_at)
    VALUES (p_key, p_type, true, now(), coalesce(p_data, '{}'::jsonb), now())
    ON CONFLICT (key) DO UPDATE SET active = true, since = now(), ended_at = NULL, clear_since = NULL, data = excluded.data, updated_at = now()
      WHERE a.active = false AND (a.ended_at IS NULL OR a.ended_at <= v_observed_at)
    RETURNING true INTO v_started;
    IF coalesce(v_started, false) THEN
      PERFORM webhook_enqueue(p_type, coalesce(p_data, '{}'::jsonb));
      RETURN true;
    END IF;
    RETURN false;
  END IF;
  -- A clear_since from before the start is stale (left by bodies of revision 2, which knew no clear time, after a
  -- rollback of these functions): this report begins the spell.
  UPDATE alert_state SET clear_since = CASE WHEN clear_since IS NULL OR clear_since < since THEN v_observed_at ELSE clear_since END,
    updated_at = now()
  WHERE key = p_key AND active AND since <= v_observed_at;
  -- Measured to this report, not to its observation: a reading that stays the latest (fees read per block, on a chain
  -- with no new block) still says clear.
  UPDATE alert_state SET active = false, ended_at = now(), clear_since = NULL, updated_at = now()
  WHERE key = p_key AND active AND clear_since IS NOT NULL
    AND v_now >= clear_since + make_interval(secs => greatest(coalesce(p_clear_ms, 0), 0) / 1000.0);
  RETURN false;
END;
$$ LANGUAGE plpgsql;

-- The signature of the release before the clear time (rolling deploys, and a rollback of these functions): the first
-- clear observation ends the alert, as then.
CREATE OR REPLACE FUNCTION webhook_report_alert(p_key text, p_type text, p_active boolean, p_data jsonb, p_observed_age_ms bigint)
RETURNS boolean AS $$
  SELECT webhook_report_alert(p_key, p_type, p_active, p_data, p_observed_age_ms, 0);
$$ LANGUAGE sql;

-- The signature of the releases before webhook_report_alert, kept for them (during a rolling deploy, and after a
-- rollback of these functions, which puts their own body back under this name): an observation of the moment.
CREATE OR REPLACE FUNCTION webhook_alert(p_key text, p_type text, p_active boolean, p_data jsonb)
RETURNS boolean AS $$
  SELECT webhook_report_alert(p_key, p_type, p_active, p_data, 0);
$$ LANGUAGE sql;

-- The five request transitions are written by the audit trigger (db/functions/sponsorship_requests_audit.sql, which
-- also drops the separate trigger of the first version): one trigger per statement does both, and looks for an
-- active endpoint once, after the audit rows.

-- sponsorships.paused / sponsorships.resumed, in the transaction that pauses or resumes (admin routes, dashboard).
CREATE OR REPLACE FUNCTION service_state_webhook() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' AND NOT NEW.paused THEN
    RETURN NULL;
  END IF;
  IF NEW.paused THEN
    PERFORM webhook_enqueue('sponsorships.paused', jsonb_build_object(
      'reason', NEW.pause_reason,
      'pausedAt', to_char(NEW.paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  ELSE
    PERFORM webhook_enqueue('sponsorships.resumed', jsonb_build_object(
      'resumedAt', to_char(NEW.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')));
  END IF;
  RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE TRIGGER service_state_webhook_update
  AFTER UPDATE OF paused ON service_state
  FOR EACH ROW WHEN (OLD.paused IS DISTINCT FROM NEW.paused)
  EXECUTE FUNCTION service_state_webhook();

CREATE OR REPLACE TRIGGER service_state_webhook_insert
  AFTER INSERT ON service_state
  FOR EACH ROW EXECUTE FUNCTION service_state_webhook();
