-- create_sponsorship_request: POST /sponsorship/request's rules, run inside PostgreSQL in one round trip.
-- This file is the function's one current source: db/migrate.ts applies every file of db/functions/ after the
-- migrations (CREATE OR REPLACE), so a change is made here, not in a new migration. lib/sponsorship/ holds the map
-- of the rules (rules.ts, create-request.ts, replay.ts) and points here.
--
-- Order of checks (decisions.md, "Order of checks at creation"): pause (503), administrator IP block (403), global
-- budget (429 budget_exhausted), then IP block/limit, wallet registered, replay, wallet block/limit, open request
-- (409), already sponsored (422: a completed request, or the registry's mirror). No chain call is made by the
-- caller: the registry is mirrored into registry_sponsored_wallets by the worker (worker/registry-index.ts), and
-- review asks the chain itself. The budget is read first without a lock (a spent budget is refused there); a request
-- that passed every limit then takes its place under the budget's lock, exactly (a race for the last places can
-- refuse it there, 429 budget_exhausted, counting nothing).
--
-- The IP's limits, automatic blocks and replay key on the client identity (p_client_key: an IPv4 address, or the
-- IPv6 prefix), administrator IP blocks on its network (p_client_net); the request records the full address (p_ip).
CREATE OR REPLACE FUNCTION create_sponsorship_request(
  p_ip text,
  p_client_key text,
  p_client_net cidr,
  p_address text,
  p_now timestamptz,
  p_ip_limit int,
  p_wallet_limit int,
  p_window_start timestamptz,
  p_replay_start timestamptz,
  p_auto_block_minutes int,
  p_ip_block_reason text,
  p_wallet_block_reason text,
  p_request_id uuid,
  p_user_agent text,
  p_registry text,
  p_budget_hour int,
  p_budget_day int,
  p_budget_shards int,
  p_budget_retry_hint timestamptz
) RETURNS json AS $$
DECLARE
  v_window interval := interval '1 hour';
  v_new_block timestamptz := p_now + make_interval(mins => p_auto_block_minutes);
  -- The budget counts on the database's clock (one clock for every instance), in whole minutes.
  v_budget_now timestamptz := statement_timestamp();
  v_shard smallint := pg_backend_pid() % p_budget_shards;
  v_budget_refusal json;
  v_budget_room bigint;
  -- No more creations than this can be in flight at once: each runs on a connection of its own.
  v_in_flight_bound int;
  v_forever boolean;
  v_blocked_until timestamptz;
  v_limit_at timestamptz;
  v_window_free timestamptz;
  v_wallet_id uuid;
  v_replay json;
  v_retry timestamptz;
  v_open boolean;
  v_completed boolean;
BEGIN
  -- Pause: every instance obeys the one row.
  IF EXISTS (SELECT 1 FROM service_state s WHERE s.id = 1 AND s.paused) THEN
    RETURN json_build_object('refusal', 'sponsorships_paused');
  END IF;

  -- Administrator IP blocks: the client's network overlaps an active block (GiST, inet_ops). Counts nothing.
  IF client_ip_blocked(p_client_net) THEN
    RETURN json_build_object('refusal', 'ip_blocked');
  END IF;

  -- Global budget (db/functions/sponsorship_budget.sql; GET /faucet asks the same refusal): a spent budget is
  -- refused here, on a read without a lock; whether there is a place for this request is decided exactly before it
  -- is counted (below).
  IF p_budget_hour > 0 OR p_budget_day > 0 THEN
    v_budget_refusal := sponsorship_budget_refusal(v_budget_now, p_budget_hour, p_budget_day, p_budget_retry_hint);
    IF v_budget_refusal IS NOT NULL THEN
      RETURN v_budget_refusal;
    END IF;
  END IF;

  PERFORM pg_advisory_xact_lock(hashtextextended('sponsorship_ip:' || p_client_key, 0));
  PERFORM pg_advisory_xact_lock(hashtextextended('wallet:' || p_address, 0));

  -- IP block / limit.
  SELECT EXISTS (
    SELECT 1 FROM blocks b
    WHERE b.subject_type = 'ip' AND b.subject = p_client_key AND b.expires_at IS NULL AND b.lifted_at IS NULL
  ) INTO v_forever;
  SELECT max(b.expires_at) INTO v_blocked_until FROM blocks b
  WHERE b.subject_type = 'ip' AND b.subject = p_client_key AND b.expires_at IS NOT NULL
    AND b.lifted_at IS NULL AND b.expires_at > p_now;
  SELECT h.created_at INTO v_limit_at FROM rate_limit_hits h
  WHERE h.scope = 'sponsorship_ip' AND h.key = p_client_key AND h.created_at > p_window_start
  ORDER BY h.created_at DESC OFFSET greatest(0, p_ip_limit - 1) LIMIT 1;
  v_window_free := v_limit_at + v_window;
  IF v_forever THEN
    RETURN json_build_object('refusal', 'rate_limited', 'subject', 'ip', 'retryAtMs', extract(epoch FROM p_now + v_window) * 1000);
  ELSIF v_blocked_until IS NOT NULL THEN
    v_retry := greatest(v_blocked_until, v_window_free);
    RETURN json_build_object('refusal', 'rate_limited', 'subject', 'ip', 'retryAtMs', extract(epoch FROM v_retry) * 1000);
  ELSIF v_limit_at IS NOT NULL THEN
    INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at)
    VALUES ('ip', p_client_key, 'automatic', p_ip_block_reason, 'rate_limiter', p_now, v_new_block);
    v_retry := greatest(v_new_block, v_window_free);
    RETURN json_build_object('refusal', 'rate_limited', 'subject', 'ip', 'retryAtMs', extract(epoch FROM v_retry) * 1000);
  END IF;

  -- Wallet registered (the IP's hit counts from here on, unless the wallet is rate-limited).
  SELECT w.id INTO v_wallet_id FROM wallets w WHERE w.wallet_address = p_address;
  IF v_wallet_id IS NULL THEN
    INSERT INTO rate_limit_hits (scope, key, created_at) VALUES ('sponsorship_ip', p_client_key, p_now);
    RETURN json_build_object('refusal', 'wallet_not_registered');
  END IF;

  -- The wallet's own requests, read once through its index (a wallet has few): the replay, an open request and a
  -- completed one are all decided from them. MATERIALIZED keeps the planner on the wallet's index (with stale
  -- statistics, separate queries scanned the whole replay window or open queue per call; docs/performance.md).
  -- The wallet's advisory lock keeps these facts current: every creator for this wallet waits for it.
  -- Replay: the same wallet from the same client identity inside the window; counts nothing.
  WITH mine AS MATERIALIZED (
    SELECT * FROM sponsorship_requests WHERE wallet_id = v_wallet_id
  )
  SELECT
    (SELECT json_build_object(
        'id', r.id,
        'walletId', r.wallet_id,
        'walletAddress', r.wallet_address,
        'status', r.status,
        'requestedAt', to_char(r.requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'approvedAt', to_char(r.approved_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'rejectedAt', to_char(r.rejected_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'completedAt', to_char(r.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'failedAt', to_char(r.failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'ipAddress', r.ip_address,
        'userAgent', r.user_agent,
        'eligibilityReason', r.eligibility_reason
      )
      FROM mine r
      WHERE r.client_key = p_client_key AND r.requested_at > p_replay_start
      ORDER BY r.requested_at DESC LIMIT 1),
    EXISTS (SELECT 1 FROM mine r WHERE r.status IN ('pending', 'approved', 'relayed')),
    EXISTS (SELECT 1 FROM mine r WHERE r.status = 'completed')
  INTO v_replay, v_open, v_completed;
  IF v_replay IS NOT NULL THEN
    RETURN json_build_object('outcome', 'replayed', 'request', v_replay);
  END IF;

  -- Wallet block / limit: an administrator's block is final (422); an automatic one or the limit is 429 and
  -- counts nothing.
  IF EXISTS (
    SELECT 1 FROM blocks b
    WHERE b.subject_type = 'wallet' AND b.subject = p_address AND b.kind = 'admin'
      AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > p_now)
  ) THEN
    INSERT INTO rate_limit_hits (scope, key, created_at)
    VALUES ('sponsorship_ip', p_client_key, p_now), ('sponsorship_wallet', p_address, p_now);
    RETURN json_build_object('refusal', 'wallet_blocked');
  END IF;
  SELECT max(b.expires_at) INTO v_blocked_until FROM blocks b
  WHERE b.subject_type = 'wallet' AND b.subject = p_address AND b.kind = 'automatic'
    AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > p_now);
  SELECT h.created_at INTO v_limit_at FROM rate_limit_hits h
  WHERE h.scope = 'sponsorship_wallet' AND h.key = p_address AND h.created_at > p_window_start
  ORDER BY h.created_at DESC OFFSET greatest(0, p_wallet_limit - 1) LIMIT 1;
  v_window_free := v_limit_at + v_window;
  IF v_blocked_until IS NOT NULL AND v_blocked_until > p_now THEN
    v_retry := greatest(v_blocked_until, v_window_free);
    RETURN json_build_object('refusal', 'rate_limited', 'subject', 'wallet', 'retryAtMs', extract(epoch FROM v_retry) * 1000);
  ELSIF v_limit_at IS NOT NULL THEN
    INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at)
    VALUES ('wallet', p_address, 'automatic', p_wallet_block_reason, 'rate_limiter', p_now, v_new_block);
    v_retry := greatest(v_new_block, v_window_free);
    RETURN json_build_object('refusal', 'rate_limited', 'subject', 'wallet', 'retryAtMs', extract(epoch FROM v_retry) * 1000);
  END IF;

  -- The budget's place, exact across instances: from here to its commit a request that passed every limit holds the
  -- budget's advisory lock (refusals before this point never take it). Shared while the budget has more room than
  -- requests can be in flight at once (each runs on a connection of its own, so none of those in flight can take the
  -- last place): they run side by side, each counted by those that start after it commits. Exclusive near the end:
  -- each waits for those in flight and counts them all. A refusal here counts nothing, as the one above.
  IF p_budget_hour > 0 OR p_budget_day > 0 THEN
    v_in_flight_bound := current_setting('max_connections')::int;
    BEGIN
      PERFORM pg_advisory_xact_lock_shared(hashtextextended('sponsorship_budget', 0));
      v_budget_room := sponsorship_budget_room(v_budget_now, p_budget_hour, p_budget_day);
      IF v_budget_room <= v_in_flight_bound THEN
        -- Near the end, or spent: rolling the block's subtransaction back gives the shared lock back.
        RAISE EXCEPTION USING ERRCODE = 'SB001';
      END IF;
    EXCEPTION WHEN SQLSTATE 'SB001' THEN
      IF v_budget_room > 0 THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('sponsorship_budget', 0));
        v_budget_room := sponsorship_budget_room(v_budget_now, p_budget_hour, p_budget_day);
      END IF;
    END;
    IF v_budget_room <= 0 THEN
      RETURN sponsorship_budget_refusal(v_budget_now, p_budget_hour, p_budget_day, p_budget_retry_hint);
    END IF;
  END IF;

  INSERT INTO rate_limit_hits (scope, key, created_at)
  VALUES ('sponsorship_ip', p_client_key, p_now), ('sponsorship_wallet', p_address, p_now);

  -- One open request per wallet.
  IF v_open THEN
    RETURN json_build_object('refusal', 'request_open');
  END IF;

  -- Already sponsored: a completed request, or the registry's mirror names the wallet.
  IF v_completed OR (p_registry IS NOT NULL AND EXISTS (
    SELECT 1 FROM registry_sponsored_wallets m WHERE m.registry_address = p_registry AND m.wallet_address = p_address
  )) THEN
    RETURN json_build_object('refusal', 'already_sponsored');
  END IF;

  INSERT INTO sponsorship_requests (id, wallet_id, wallet_address, ip_address, client_key, user_agent, requested_at, status_actor, status_reason)
  VALUES (p_request_id, v_wallet_id, p_address, p_ip, p_client_key, p_user_agent, p_now, 'api', 'created by POST /sponsorship/request');
  UPDATE wallets SET sponsorship_count = sponsorship_count + 1, last_seen_at = GREATEST(last_seen_at, p_now)
  WHERE id = v_wallet_id;
  -- Counted last, in the row of this connection's shard and the current minute (its row lock is held to the commit
  -- that follows: creations of one shard and minute are counted one at a time, those of different shards do not
  -- wait for each other's row; the budget's lock, above, orders them only near the end).
  INSERT INTO sponsorship_budget_counts AS c (shard, minute, created)
  VALUES (v_shard, date_trunc('minute', v_budget_now), 1)
  ON CONFLICT (shard, minute) DO UPDATE SET created = c.created + 1;
  RETURN json_build_object('outcome', 'created', 'walletId', v_wallet_id);
END;
$$ LANGUAGE plpgsql VOLATILE;
