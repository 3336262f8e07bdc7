-- register_wallet: POST /wallets/register's rules, run inside PostgreSQL in one round trip.
-- This file is the function's one current source: db/migrate.ts applies every file of db/functions/ after the
-- migrations (CREATE OR REPLACE), so a change is made here, not in a new migration. lib/sponsorship/wallets.ts
-- holds the rule in words and rules.ts maps it here.
--
-- Order of checks (decisions.md, "POST /wallets/register" and "On the open internet"): administrator IP block
-- (403, counts nothing), then the registration limit of the client identity (REGISTER_LIMIT_IP_PER_HOUR in the
-- rolling hour; a refused registration counts nothing), then the hit is counted and the wallet upserted in the
-- statement's own transaction. The identity's advisory lock (the key of lib/sponsorship/lock-keys.ts,
-- registerIpLockKey) serialises registrations of one identity, so concurrent ones cannot exceed the limit: each
-- statement of a volatile function takes a new snapshot, so the count read after the lock sees what the previous
-- holder committed.
--
-- The caller passes the time (an injectable clock) and the window's start. Returns json:
--   {"refusal": "ip_blocked"}
--   {"refusal": "rate_limited", "limitReachedAtMs": epoch ms of the limit-th newest hit inside the window}
--   {"outcome": "registered", "created": boolean, "wallet": {...the wallet view of db/queries/wallets.ts...}}
CREATE OR REPLACE FUNCTION register_wallet(
  p_client_key text,
  p_client_net cidr,
  p_address text,
  p_now timestamptz,
  p_limit int,
  p_window_start timestamptz
) RETURNS json AS $$
DECLARE
  v_limit_at timestamptz;
  v_id uuid;
  v_first_seen timestamptz;
  v_last_seen timestamptz;
  v_count int;
  v_created boolean;
BEGIN
  -- Administrator IP blocks: the client's network overlaps an active block (client_ip_blocked). Counts nothing.
  IF client_ip_blocked(p_client_net) THEN
    RETURN json_build_object('refusal', 'ip_blocked');
  END IF;

  PERFORM pg_advisory_xact_lock(hashtextextended('register_ip:' || p_client_key, 0));

  -- Registration limit: the limit-th newest hit inside the rolling hour, if any, is when the limit was reached
  -- (Retry-After runs from it). Refused: counts nothing.
  SELECT h.created_at INTO v_limit_at FROM rate_limit_hits h
  WHERE h.scope = 'register_ip' AND h.key = p_client_key AND h.created_at > p_window_start
  ORDER BY h.created_at DESC OFFSET greatest(0, p_limit - 1) LIMIT 1;
  IF v_limit_at IS NOT NULL THEN
    RETURN json_build_object('refusal', 'rate_limited', 'limitReachedAtMs', extract(epoch FROM v_limit_at) * 1000);
  END IF;

  -- Counted and upserted: a registration again moves lastSeenAt (never back), `created` tells 201 from 200.
  INSERT INTO rate_limit_hits (scope, key, created_at) VALUES ('register_ip', p_client_key, p_now);
  INSERT INTO wallets AS w (wallet_address, first_seen_at, last_seen_at)
  VALUES (p_address, p_now, p_now)
  ON CONFLICT (wallet_address) DO UPDATE SET last_seen_at = GREATEST(w.last_seen_at, EXCLUDED.last_seen_at)
  RETURNING w.id, w.first_seen_at, w.last_seen_at, w.sponsorship_count, (w.xmax = 0) INTO v_id, v_first_seen, v_last_seen, v_count, v_created;

  -- The wallet view of db/queries/wallets.ts (walletViewColumns; lib/sponsorship/wallets.test.ts compares them).
  RETURN json_build_object(
    'outcome', 'registered',
    'created', v_created,
    'wallet', json_build_object(
      'id', v_id,
      'walletAddress', p_address,
      'firstSeenAt', to_char(v_first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'lastSeenAt', to_char(v_last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'sponsorshipCount', v_count,
      -- A blocked wallet still registers; the view shows the block (lib/sponsorship/blocks.ts).
      'isBlocked', EXISTS (
        SELECT 1 FROM blocks b
        WHERE b.subject_type = 'wallet' AND b.subject = p_address
          AND b.lifted_at IS NULL AND (b.expires_at IS NULL OR b.expires_at > p_now)
      )
    )
  );
END;
$$ LANGUAGE plpgsql VOLATILE;
