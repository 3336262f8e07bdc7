-- The global budget's reads (decisions.md, "Global budget"); the counters are written by
-- create_sponsorship_request (db/functions/create_sponsorship_request.sql) and pruned by pruneBudgetCounts.
--
-- Windows are counted in whole minutes, conservatively: the rolling hour is the current minute and the 60 before
-- it, the day the current minute and the 1,440 before it. So the budget never allows more than it says (creations
-- in flight at the same moment are kept from passing it by create_sponsorship_request's lock); it may refuse up to
-- a minute early.

-- Created requests in the rolling hour and day: the windows' settled part (sponsorship_budget_windows, once per
-- minute) plus the live rows of the current and the previous minute, so one key lookup and a range of at most two
-- minutes' shards, however many requests. A minute is settled two minutes later: no creation still running can add
-- to it then, since a creation is one statement well under a minute (the web pool's statement_timeout is 5 s).
-- The first read of a minute sums the windows' older minutes once (a range over the minute index) and keeps it;
-- several readers racing on it compute the same sums, and only one of them keeps them.
DROP FUNCTION IF EXISTS sponsorship_budget_used(timestamptz, int);
CREATE OR REPLACE FUNCTION sponsorship_budget_used(p_now timestamptz)
RETURNS TABLE (used_hour bigint, used_day bigint) AS $$
DECLARE
  v_minute timestamptz := date_trunc('minute', p_now);
  v_live_from timestamptz := v_minute - interval '1 minute';
  v_hour bigint;
  v_day bigint;
  v_live bigint;
BEGIN
  SELECT w.hour_settled, w.day_settled INTO v_hour, v_day FROM sponsorship_budget_windows w WHERE w.minute = v_minute;
  IF NOT FOUND THEN
    SELECT
      coalesce(sum(c.created) FILTER (WHERE c.minute >= v_minute - interval '60 minutes'), 0),
      coalesce(sum(c.created), 0)
    INTO v_hour, v_day
    FROM sponsorship_budget_counts c
    WHERE c.minute >= v_minute - interval '1440 minutes' AND c.minute < v_live_from;
    -- Kept by one reader only, and never waited for: the row stays uncommitted until the reader's transaction ends,
    -- and a creation's ends after its client's and its wallet's locks. Others that read the minute meanwhile sum for
    -- themselves; before, their ON CONFLICT waited on that row, so one client's lock wait held up every creation and
    -- GET /faucet (a lock_timeout's 503). The key is the minute's epoch: the same in every session's TimeZone.
    IF pg_try_advisory_xact_lock(hashtextextended('sponsorship_budget_windows:' || extract(epoch FROM v_minute)::bigint, 0)) THEN
      INSERT INTO sponsorship_budget_windows (minute, hour_settled, day_settled) VALUES (v_minute, v_hour, v_day)
      ON CONFLICT (minute) DO NOTHING;
    END IF;
  END IF;
  -- By key (equality on the minute: a generic plan of a range would scan the table). The minute after the current
  -- one too: a creation whose statement started later than this read may already have committed into it.
  SELECT coalesce(sum(c.created), 0) INTO v_live FROM sponsorship_budget_counts c
  WHERE c.minute = ANY (ARRAY[v_live_from, v_minute, v_minute + interval '1 minute']);
  used_hour := v_hour + v_live;
  used_day := v_day + v_live;
  RETURN NEXT;
END;
$$ LANGUAGE plpgsql VOLATILE;

-- Creations the budget still allows (p_hour, p_day: the budgets, 0 for none; at least one is set): the smaller room
-- of the windows that have a budget, 0 or less when one is full.
CREATE OR REPLACE FUNCTION sponsorship_budget_room(p_now timestamptz, p_hour int, p_day int)
RETURNS bigint AS $$
  SELECT least(CASE WHEN p_hour > 0 THEN p_hour - u.used_hour END, CASE WHEN p_day > 0 THEN p_day - u.used_day END)
  FROM sponsorship_budget_used(p_now) u;
$$ LANGUAGE sql VOLATILE;

-- When the window has room again: the oldest minutes leave it one by one; the answer is the moment the
-- `p_excess`-th oldest creation in the window has left. Only read on a refusal.
CREATE OR REPLACE FUNCTION sponsorship_budget_room_at(p_now timestamptz, p_window interval, p_excess bigint)
RETURNS timestamptz AS $$
DECLARE
  v_start timestamptz := date_trunc('minute', p_now) - p_window;
  v_left bigint := 0;
  v_row record;
BEGIN
  FOR v_row IN
    SELECT c.minute, sum(c.created) AS n FROM sponsorship_budget_counts c
    WHERE c.minute >= v_start GROUP BY c.minute ORDER BY c.minute
  LOOP
    v_left := v_left + v_row.n;
    -- The minute m is in the window while m >= date_trunc('minute', now) - window: it leaves at m + window + 1 min.
    IF v_left >= p_excess THEN
      RETURN v_row.minute + p_window + interval '1 minute';
    END IF;
  END LOOP;
  RETURN p_now + interval '1 minute';
END;
$$ LANGUAGE plpgsql STABLE;

-- The budget's refusal, or NULL while it has room (p_hour, p_day: the budgets, 0 for none). Read without a lock (the
-- creation's exact check is in create_sponsorship_request). When it is spent, Retry-After is when every full window has
-- room (the later of the two). Computing that walks the window's minutes, so a caller may pass the time it was last
-- told (p_hint): while that is still ahead, and nothing can be created meanwhile, it is the answer without the walk
-- (a client hammering a spent budget costs a few index lookups a request). create_sponsorship_request and
-- GET /faucet both ask here, so the 429 and the status cannot disagree.
DROP FUNCTION IF EXISTS sponsorship_budget_refusal(timestamptz, int, int, int, timestamptz);
CREATE OR REPLACE FUNCTION sponsorship_budget_refusal(p_now timestamptz, p_hour int, p_day int, p_hint timestamptz)
RETURNS json AS $$
DECLARE
  v_used_hour bigint;
  v_used_day bigint;
  v_hour_full boolean;
  v_day_full boolean;
  v_retry timestamptz;
BEGIN
  IF p_hour <= 0 AND p_day <= 0 THEN
    RETURN NULL;
  END IF;
  SELECT u.used_hour, u.used_day INTO v_used_hour, v_used_day FROM sponsorship_budget_used(p_now) u;
  v_hour_full := p_hour > 0 AND v_used_hour >= p_hour;
  v_day_full := p_day > 0 AND v_used_day >= p_day;
  IF NOT (v_hour_full OR v_day_full) THEN
    RETURN NULL;
  END IF;
  IF p_hint IS NOT NULL AND p_hint > p_now THEN
    v_retry := p_hint;
  ELSE
    v_retry := greatest(
      -- In minutes, as sponsorship_budget_used counts: '1 day' on a timestamptz is a calendar day in the session's
      -- TimeZone, 23 or 25 hours across a change of daylight saving time.
      CASE WHEN v_hour_full THEN sponsorship_budget_room_at(p_now, interval '60 minutes', v_used_hour - p_hour + 1) END,
      CASE WHEN v_day_full THEN sponsorship_budget_room_at(p_now, interval '1440 minutes', v_used_day - p_day + 1) END);
  END IF;
  -- retryInMs: the wait on the clock that counted (p_now), so a caller never subtracts its own clock from retryAtMs.
  RETURN json_build_object('refusal', 'budget_exhausted', 'window', CASE WHEN v_day_full THEN 'day' ELSE 'hour' END,
    'retryAtMs', extract(epoch FROM v_retry) * 1000, 'retryInMs', extract(epoch FROM v_retry - p_now) * 1000);
END;
$$ LANGUAGE plpgsql VOLATILE;
