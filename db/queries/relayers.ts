import { sql, type SQL } from "drizzle-orm";
import type { Address } from "viem";
import { query, run, type Executor, type Query } from "@/db/sql/run";
import { GONE_WORKER_AFTER_SECONDS } from "./heartbeats";

/**
 * Relayer accounts and their nonce leases. A relayer's nonce sequence is owned by exactly one worker at a time:
 * the lease (lease_owner, lease_expires_at) is taken only when free, expired or held by a dead process, renewed
 * with the heartbeat, and checked (row locked, owner compared) inside every transaction that spends a nonce, so a
 * worker that lost its lease cannot assign a nonce the new owner also assigns.
 */

/** `(p1, p2, ...)` for `IN`: one parameter per item. */
const list = (items: readonly string[]) =>
  sql`(${sql.join(
    items.map((i) => sql`${i}`),
    sql`, `,
  )})`;

/**
 * Whether the relayer `address` (an SQL expression) is still in service: a worker that beat within
 * GONE_WORKER_AFTER_SECONDS has its key (or does not say which keys it has), a transaction of it is still open
 * (queued or submitted, relay or fill: it waits for a worker with the key, docs/worker.md "Known limits"), or it was
 * leased within GONE_WORKER_AFTER_SECONDS (a worker restarted with its own keys deletes its heartbeat at its stop:
 * its relayers must not leave the metrics, nor their alerts end, for the seconds it takes to come back). While no
 * worker has beaten that recently (all stopped or down) every relayer is, as nothing then says which were retired.
 * A retired relayer (its key in no running worker's RELAYER_PRIVATE_KEYS, nothing of it open) leaves the relayer
 * metrics (db/queries/metrics.ts) and its `relayer.out_of_gas` alert ends (db/queries/webhooks.ts); both come back
 * with the first worker started with its key again.
 */
export function relayerInService(address: SQL): SQL {
  const live = sql`h.last_beat_at > now() - ${GONE_WORKER_AFTER_SECONDS} * interval '1 second'`;
  const configured = sql`h.details -> 'relayers' -> 'configured'`;
  return sql`(NOT EXISTS (SELECT 1 FROM worker_heartbeats h WHERE ${live})
    OR EXISTS (SELECT 1 FROM worker_heartbeats h
      WHERE ${live} AND (jsonb_typeof(${configured}) IS DISTINCT FROM 'array' OR ${configured} @> jsonb_build_array(${address})))
    OR EXISTS (SELECT 1 FROM relay_transactions t WHERE t.status IN ('queued', 'submitted') AND t.relayer_address = ${address})
    OR EXISTS (SELECT 1 FROM relayer_nonce_fills f WHERE f.status IN ('queued', 'submitted') AND f.relayer_address = ${address})
    OR EXISTS (SELECT 1 FROM relayer_accounts l
      WHERE l.address = ${address} AND greatest(l.lease_expires_at, l.updated_at) > now() - ${GONE_WORKER_AFTER_SECONDS} * interval '1 second'))`;
}

export type RelayerLease = {
  address: Address;
  nextNonce: number;
  leaseOwner: string | null;
  /** Whether the lease has run out (or was never taken), as the database's clock says: the one the lease was set by. */
  leaseExpired: boolean;
};

/**
 * Registers the configured relayer accounts (no-op for those already known) and returns those this database knows
 * on another chain: their nonce state belongs to that chain.
 */
export async function ensureRelayerAccounts(db: Executor, chainId: number, addresses: readonly Address[]): Promise<{ address: Address; chainId: number }[]> {
  if (addresses.length === 0) return [];
  const rows = sql.join(
    addresses.map((a) => sql`(${a}, ${chainId}::int)`),
    sql`, `,
  );
  await run(
    db,
    sql`
    INSERT INTO relayer_accounts (address, chain_id) VALUES ${rows}
    ON CONFLICT (address) DO NOTHING`,
  );
  const others = await run<{ address: string; chain_id: number }>(
    db,
    sql`
    SELECT address, chain_id FROM relayer_accounts WHERE address IN ${list(addresses)} AND chain_id <> ${chainId}::int ORDER BY address`,
  );
  return others.map((r) => ({ address: r.address as Address, chainId: Number(r.chain_id) }));
}

export async function listRelayerLeases(db: Executor, addresses: readonly Address[]): Promise<RelayerLease[]> {
  if (addresses.length === 0) return [];
  const rows = await run<{ address: string; next_nonce: string; lease_owner: string | null; lease_expired: boolean }>(
    db,
    sql`
    SELECT address, next_nonce, lease_owner, coalesce(lease_expires_at < now(), true) AS lease_expired FROM relayer_accounts
    WHERE address IN ${list(addresses)} ORDER BY address`,
  );
  return rows.map((r) => ({
    address: r.address as Address,
    nextNonce: Number(r.next_nonce),
    leaseOwner: r.lease_owner,
    leaseExpired: r.lease_expired,
  }));
}

/**
 * Takes the lease of one relayer when it is free, expired, already ours, or held by one of `deadOwners`
 * (workers known to be dead, e.g. a killed process on this host). Returns the account's next nonce, or
 * undefined when another live worker holds it.
 */
export async function acquireRelayerLease(
  db: Executor,
  address: Address,
  owner: string,
  ttlMs: number,
  deadOwners: readonly string[],
): Promise<{ nextNonce: number; previousOwner: string | null } | undefined> {
  const dead = deadOwners.length > 0 ? sql`OR a.lease_owner IN ${list(deadOwners)}` : sql``;
  const rows = await run<{ next_nonce: string; previous_owner: string | null }>(
    db,
    sql`
    UPDATE relayer_accounts a SET lease_owner = ${owner}, lease_expires_at = now() + ${ttlMs} * interval '1 millisecond', updated_at = now()
    FROM (SELECT address, lease_owner AS previous_owner FROM relayer_accounts WHERE address = ${address} FOR UPDATE) p
    WHERE a.address = p.address
      AND (a.lease_owner IS NULL OR a.lease_owner = ${owner} OR a.lease_expires_at IS NULL OR a.lease_expires_at < now() ${dead})
    RETURNING a.next_nonce, p.previous_owner`,
  );
  const row = rows[0];
  return row ? { nextNonce: Number(row.next_nonce), previousOwner: row.previous_owner } : undefined;
}

/** Extends the leases still held by `owner`; returns the addresses it still holds. */
export async function renewRelayerLeases(db: Executor, owner: string, addresses: readonly Address[], ttlMs: number): Promise<Address[]> {
  if (addresses.length === 0) return [];
  const rows = await run<{ address: string }>(
    db,
    sql`
    UPDATE relayer_accounts SET lease_expires_at = now() + ${ttlMs} * interval '1 millisecond'
    WHERE address IN ${list(addresses)} AND lease_owner = ${owner}
    RETURNING address`,
  );
  return rows.map((r) => r.address as Address);
}

/** Gives leases back (graceful shutdown, rebalancing): another worker may take them at once. */
export async function releaseRelayerLeases(db: Executor, owner: string, addresses: readonly Address[]): Promise<void> {
  if (addresses.length === 0) return;
  await run(
    db,
    sql`
    UPDATE relayer_accounts SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE address IN ${list(addresses)} AND lease_owner = ${owner}`,
  );
}

/**
 * Locks the relayer rows `owner` still leases, for a transaction that assigns nonces; returns their next nonces.
 * A relayer missing from the answer has been taken over: the caller must not use it.
 */
const LOCK_LEASED = `
    SELECT address, next_nonce FROM relayer_accounts
    WHERE address = ANY($1::text[]) AND lease_owner = $2
    ORDER BY address
    FOR UPDATE`;

export function lockLeasedRelayers(owner: string, addresses: readonly Address[]): Query<Map<Address, number>> {
  return query(LOCK_LEASED, [addresses, owner], (rows) => new Map(rows.map((r) => [r.address as Address, Number(r.next_nonce)])));
}

/** Records the next nonces after a transaction assigned some (only where `owner` still holds the lease). */
const SET_NEXT_NONCES = `
    UPDATE relayer_accounts a SET next_nonce = v.nonce, updated_at = now()
    FROM unnest($1::text[], $2::bigint[]) AS v(address, nonce)
    WHERE a.address = v.address AND a.lease_owner = $3
    RETURNING a.address`;

/** Answers the number of relayers updated. */
export function setRelayerNextNonces(owner: string, next: ReadonlyMap<Address, number>): Query<number> {
  return query(SET_NEXT_NONCES, [[...next.keys()], [...next.values()].map(String), owner], (rows) => rows.length);
}

/** The highest nonce this service ever stored for the relayer (relay attempts and fills), or -1. */
export async function findHighestStoredNonce(db: Executor, address: Address): Promise<number> {
  const [row] = await run<{ n: string | null }>(
    db,
    sql`
    SELECT GREATEST(
      (SELECT max(nonce) FROM relay_transactions WHERE relayer_address = ${address}),
      (SELECT max(nonce) FROM relayer_nonce_fills WHERE relayer_address = ${address})
    ) AS n`,
  );
  return row?.n == null ? -1 : Number(row.n);
}
