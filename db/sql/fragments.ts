import { sql, type SQL } from "drizzle-orm";

/** A timestamptz rendered in the wire format: ISO 8601, UTC, milliseconds (`2026-11-22T10:00:00.000Z`). */
export function isoUtc(expression: SQL): SQL<string> {
  return sql<string>`to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}

/** A JS Date as a timestamptz parameter (explicit text + cast: no reliance on driver type inference). */
export function ts(date: Date): SQL {
  return sql`${date.toISOString()}::timestamptz`;
}

/** The condition "this block row is active at `now`" for a blocks table aliased `alias`. */
export function blockActive(alias: string, now: Date): SQL {
  const a = sql.raw(alias);
  return sql`${a}.lifted_at IS NULL AND (${a}.expires_at IS NULL OR ${a}.expires_at > ${ts(now)})`;
}
