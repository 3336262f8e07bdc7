-- The global budget's reads (decisions.md, "Global budget"); the counters are written by
-- create_sponsorship_request (db/functions/create_sponsorship_request.sql) and pruned by pruneBudgetCounts.
--
-- Windows are counted in whole minutes, conservatively: the rolling hour is the current minute and the 60 before
-- it, the day the current minute and the 1,440 before it. So the budget never allows more than it says, except
-- for creations in flight at the same moment (each reads before the others commit); it may refuse up to a
-- minute early.

-- Created requests in the rolling hour and day: per shard, its newest running total minus its total before the
-- window (a few index lookups per shard, however many requests).
CREATE OR REPLACE FUNCTION sponsorship_budget_used(p_now timestamptz, p_shards int)
RETURNS TABLE (used_hour bigint, used_day bigint) AS $$
  SELECT
    coalesce(sum(latest.t - coalesce(h.t, 0)), 0)::bigint,
    coalesce(sum(latest.t - coalesce(d.t, 0)), 0)::bigint
  FROM generate_series(0, p_shards - 1) s(shard)
  CROSS JOIN LATERAL (
    SELECT c.created_total AS t FROM sponsorship_budget_counts c WHERE c.shard = s.shard ORDER BY c.minute DESC LIMIT 1
  ) latest
  LEFT JOIN LATERAL (
    SELECT c.created_total AS t FROM sponsorship_budget_counts c
    WHERE c.shard = s.shard AND c.minute < date_trunc('minute', p_now) - interval '60 minutes'
    ORDER BY c.minute DESC LIMIT 1
  ) h ON true
  LEFT JOIN LATERAL (
    SELECT c.created_total AS t FROM sponsorship_budget_counts c
    WHERE c.shard = s.shard AND c.minute < date_trunc('minute', p_now) - interval '1440 minutes'
    ORDER BY c.minute DESC LIMIT 1
  ) d ON true;
$$ LANGUAGE sql STABLE;

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

-- The budget's refusal, or NULL while it has room (p_hour, p_day: the budgets, 0 for none). Read without a lock:
-- concurrent creations may overshoot by those in flight. When it is spent, Retry-After is when every full window has
-- room (the later of the two). Computing that walks the window's minutes, so a caller may pass the time it was last
-- told (p_hint): while that is still ahead, and nothing can be created meanwhile, it is the answer without the walk
-- (a client hammering a spent budget costs a few index lookups a request). create_sponsorship_request and
-- GET /faucet both ask here, so the 429 and the status cannot disagree.
CREATE OR REPLACE FUNCTION sponsorship_budget_refusal(p_now timestamptz, p_hour int, p_day int, p_shards int, p_hint timestamptz)
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
  SELECT u.used_hour, u.used_day INTO v_used_hour, v_used_day FROM sponsorship_budget_used(p_now, p_shards) u;
  v_hour_full := p_hour > 0 AND v_used_hour >= p_hour;
  v_day_full := p_day > 0 AND v_used_day >= p_day;
  IF NOT (v_hour_full OR v_day_full) THEN
    RETURN NULL;
  END IF;
  IF p_hint IS NOT NULL AND p_hint > p_now THEN
    v_retry := p_hint;
  ELSE
    v_retry := greatest(
      CASE WHEN v_hour_full THEN sponsorship_budget_room_at(p_now, interval '1 hour', v_used_hour - p_hour + 1) END,
      CASE WHEN v_day_full THEN sponsorship_budget_room_at(p_now, interval '1 day', v_used_day - p_day + 1) END);
  END IF;
  RETURN json_build_object('refusal', 'budget_exhausted', 'window', CASE WHEN v_day_full THEN 'day' ELSE 'hour' END,
    'retryAtMs', extract(epoch FROM v_retry) * 1000);
END;
$$ LANGUAGE plpgsql STABLE;
