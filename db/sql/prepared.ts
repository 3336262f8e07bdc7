import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type postgres from "postgres";
import type { Executor } from "./executor";

/**
 * Runs a raw statement as a named prepared statement. Drizzle's `execute` sends every parameterised statement
 * unnamed, so postgres.js first asks the server for the parameter types (an extra round trip) and the server
 * parses and plans it again each time; for the hot paths (request creation and reads, /health) that was most of
 * their database time. postgres.js caches the prepared statement per connection by its text, so each distinct
 * statement text is parsed once per connection and its plan can be reused.
 */

const dialect = new PgDialect();

/** The postgres.js client under a Drizzle database or transaction (the pool, or the transaction's connection). */
export function clientOf(db: Executor): postgres.Sql {
  // Drizzle keeps its session public at runtime but not in its types; the session holds the postgres.js client.
  return (db as unknown as { session: { client: postgres.Sql } }).session.client;
}

export async function queryPrepared<T extends object>(db: Executor, query: SQL): Promise<T[]> {
  const { sql, params } = dialect.sqlToQuery(query);
  const rows = await clientOf(db).unsafe<T[]>(sql, params as postgres.ParameterOrJSON<never>[], { prepare: true });
  return rows;
}
