-- Whether an administrator's active IP block overlaps a client's identity network (decisions.md, "On the open
-- internet"). The one source of the matching rule: create_sponsorship_request and the registration
-- (db/queries/wallets.ts) both ask here. A plain SQL function, so the planner inlines it and the partial GiST index
-- (ip_blocks_active_cidr_idx, inet_ops) serves the `&&`.
CREATE OR REPLACE FUNCTION client_ip_blocked(p_client_net cidr) RETURNS boolean AS $$
  SELECT EXISTS (SELECT 1 FROM ip_blocks b WHERE b.lifted_at IS NULL AND b.cidr && p_client_net);
$$ LANGUAGE sql STABLE;
