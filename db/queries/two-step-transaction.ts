import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type postgres from "postgres";
import type { Database } from "@/db/client";

/**
 * A transaction in two round trips, for the hot write paths (request creation, registration): BEGIN and the
 * first statements (typically an advisory lock, then a read of every fact the decision needs) leave together,
 * pipelined on one connection; the caller decides; then the writes and COMMIT leave together.
 *
 * Pipelined statements still run one after the other, each with its own snapshot, so a read that follows a lock
 * sees everything the lock's previous holder committed (READ COMMITTED). If any statement fails, the transaction
 * is rolled back and the error is thrown. Statements are named prepared statements (parsed once per connection).
 *
 * Why not `db.transaction`: it costs a round trip per statement plus BEGIN and COMMIT, and on a small machine
 * every round trip is a system call pair in the web process; the creation path went from five to two.
 */

const dialect = new PgDialect();

export type Row = Record<string, unknown>;

/** A Drizzle SQL, or a statement whose text is already built (only the parameters vary). */
export type Statement = SQL | { text: string; params: unknown[] };

function send(connection: postgres.ReservedSql, query: Statement): Promise<Row[]> {
  const { sql, params } = "text" in query ? { sql: query.text, params: query.params } : dialect.sqlToQuery(query);
  return connection.unsafe<Row[]>(sql, params as postgres.ParameterOrJSON<never>[], { prepare: true }).then((rows) => [...rows]);
}

/** The second step: its statements, and how to make the result from their rows. */
export type SecondStep<T> = { statements: Statement[]; finish: (results: Row[][]) => T };

export async function twoStepTransaction<T>(
  db: Database,
  first: Statement[],
  decide: (results: Row[][]) => Promise<SecondStep<T>> | SecondStep<T>,
): Promise<T> {
  const connection = await db.$client.reserve();
  let open = false;
  try {
    // postgres.js queries are lazy (sent when awaited): start BEGIN before the statements so it leaves first.
    const begin = connection.unsafe("BEGIN").then(() => []);
    open = true;
    const results = await Promise.all([begin, ...first.map((q) => send(connection, q))]).then(([, ...rest]) => rest);
    const { statements, finish } = await decide(results);
    const sent = statements.map((q) => send(connection, q));
    const written = await Promise.all([...sent, connection.unsafe("COMMIT").then(() => [])]);
    open = false;
    return finish(written.slice(0, statements.length));
  } catch (error) {
    if (open) await connection.unsafe("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    connection.release();
  }
}
