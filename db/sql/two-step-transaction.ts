import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type { Database } from "@/db/client";
import { pipelinedTransaction, type Row, type Statement as FixedStatement } from "./pipelined";

/**
 * A transaction in two round trips, for the hot write paths (registration): BEGIN and the first statements
 * (typically an advisory lock, then a read of every fact the decision needs) leave together, pipelined on one
 * connection; the caller decides; then the writes and COMMIT leave together. A thin shape over
 * `pipelinedTransaction` (./pipelined.ts) that also takes Drizzle `sql` statements.
 *
 * Pipelined statements still run one after the other, each with its own snapshot, so a read that follows a lock
 * sees everything the lock's previous holder committed (READ COMMITTED). If any statement fails, the transaction
 * is rolled back and the error is thrown. Statements are named prepared statements (parsed once per connection).
 *
 * Why not `db.transaction`: it costs a round trip per statement plus BEGIN and COMMIT, and on a small machine
 * every round trip is a system call pair in the web process.
 */

const dialect = new PgDialect();

export type { Row };

/** A Drizzle SQL, or a statement whose text is already built (only the parameters vary). */
export type Statement = SQL | { text: string; params: unknown[] };

function fixed(query: Statement): FixedStatement {
  if ("text" in query) return query;
  const { sql, params } = dialect.sqlToQuery(query);
  return { text: sql, params };
}

/** The second step: its statements, and how to make the result from their rows. */
export type SecondStep<T> = { statements: Statement[]; finish: (results: Row[][]) => T };

export async function twoStepTransaction<T>(
  db: Database,
  first: Statement[],
  decide: (results: Row[][]) => Promise<SecondStep<T>> | SecondStep<T>,
): Promise<T> {
  return pipelinedTransaction(db, async (tx) => {
    const results = await tx.run(first.map(fixed));
    const { statements, finish } = await decide(results);
    return finish(await tx.commit(statements.map(fixed)));
  });
}
