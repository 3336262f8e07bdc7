-- Whether an administrator's active IP block overlaps a client's identity network (decisions.md, "On the open
-- internet"). The one source of the matching rule: create_sponsorship_request and register_wallet
-- (registration) both ask here. Its query (a sub-select, so it is not inlined into the caller's) is planned
-- on its own, and the partial GiST index (ip_blocks_active_cidr_idx, inet_ops) serves the `&&`: an index search per
-- call, however many blocks (db/ip-blocks.test.ts counts the scans).
CREATE OR REPLACE FUNCTION client_ip_blocked(p_client_net cidr) RETURNS boolean AS $$
  SELECT EXISTS (SELECT 1 FROM ip_blocks b WHERE b.lifted_at IS NULL AND b.cidr && p_client_net);
$$ LANGUAGE sql STABLE;
