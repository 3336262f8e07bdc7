import type postgres from "postgres";
import type { Database } from "@/db/client";
import type { Executor } from "./executor";
import { clientOf } from "./prepared";

/**
 * The worker's statements as fixed texts (lists travel as array parameters, so the text never depends on a batch's
 * size) run as named prepared statements: parsed and described once per connection, then only bound and executed.
 * Drizzle's `execute` sends each statement unnamed, which costs a describe round trip and a parse and plan on the
 * server every time; and VALUES/IN lists built per batch made every batch size a new statement text.
 *
 * `pipelinedTransaction` sends BEGIN with the first statements and COMMIT with the last ones: statements that do
 * not depend on each other's answers leave together on one connection (pipelined: still executed one after the
 * other, each seeing what the previous ones did), so a transaction costs one round trip per decision the client
 * makes rather than one per statement.
 */

export type Row = Record<string, unknown>;
/** A statement whose text is built once; only the parameters vary. */
export type Statement = { text: string; params: readonly unknown[] };

/**
 * postgres.js refuses an undefined parameter (or array element) on the client, without sending the statement: the
 * server's transaction is then not aborted, so statements pipelined behind it, and a COMMIT, still run (a partial
 * commit), and once the statements are prepared on the connection postgres.js rejects the wrong query and its
 * answers go out of step (the transaction never settles). Checked for a whole batch before any of it is sent.
 */
function assertSendable(statements: readonly Statement[]): void {
  for (const s of statements) {
    for (const [i, p] of s.params.entries()) {
      if (p === undefined || (Array.isArray(p) && p.includes(undefined))) {
        throw new TypeError(`undefined value in parameter $${i + 1} of: ${s.text.trim().replace(/\s+/g, " ").slice(0, 80)}`);
      }
    }
  }
}

function send(client: postgres.Sql | postgres.ReservedSql, statement: Statement): Promise<Row[]> {
  return client.unsafe<Row[]>(statement.text, statement.params as postgres.ParameterOrJSON<never>[], { prepare: true }).then((rows) => rows);
}

/** Runs statements (together: pipelined inside a transaction, on any free connection otherwise); rows of each. */
export async function runStatements(db: Executor, statements: readonly Statement[]): Promise<Row[][]> {
  const client = clientOf(db);
  assertSendable(statements);
  return Promise.all(statements.map((s) => send(client, s)));
}

export async function runStatement(db: Executor, statement: Statement): Promise<Row[]> {
  assertSendable([statement]);
  return send(clientOf(db), statement);
}

/** A statement whose answer is mapped: `parse` gets its rows. */
export type Query<T> = Statement & { parse: (rows: Row[]) => T };

export type PipelinedTransaction = {
  /** Sends the statements together (after BEGIN, the first time) and waits for every answer. */
  run: (statements: readonly Statement[]) => Promise<Row[][]>;
  /** Sends the statements together with COMMIT; the transaction is over when this resolves. */
  commit: (statements?: readonly Statement[]) => Promise<Row[][]>;
};

type Answers<T extends readonly Query<unknown>[]> = { -readonly [K in keyof T]: T[K] extends Query<infer R> ? R : never };

/** `tx.run` (or `tx.commit` with `commit`) for queries, each answer parsed. */
export async function sendQueries<const T extends readonly Query<unknown>[]>(
  tx: PipelinedTransaction,
  queries: T,
  options: { commit?: boolean } = {},
): Promise<Answers<T>> {
  const answers = await (options.commit ? tx.commit(queries) : tx.run(queries));
  return queries.map((q, i) => q.parse(answers[i]!)) as Answers<T>;
}

const LOST_CONNECTION_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

/** The connection itself failed (dropped, reset, ended, or the server terminated the session). */
function connectionLost(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (LOST_CONNECTION_CODES.has(code) || /^57P0[123]$/.test(code));
}

/** How long a transaction waits for a connection of the pool before it fails as an outage. */
export const RESERVE_TIMEOUT_MS = 15_000;

/**
 * A reserved connection, or a CONNECT_TIMEOUT error after `ms`. postgres.js can leave a reserve that was queued
 * during a database outage waiting for ever even after the database is back (a rarer path than the one
 * scripts/patch-postgres.mjs closes; seen as a worker stuck in a stage after a cut). A caller then fails as in any
 * outage and tries again with a new reserve; the abandoned one, should it ever be granted, is released at once.
 */
async function reserveWithin(db: Database, ms: number): Promise<postgres.ReservedSql> {
  const reserving = db.$client.reserve();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reserving.then((late) => late.release(), () => {});
      reject(Object.assign(new Error(`no database connection within ${ms} ms`), { code: "CONNECT_TIMEOUT" }));
    }, ms);
  });
  try {
    return await Promise.race([reserving, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A transaction on one reserved connection whose statements leave in batches (see above). `body` may end it with
 * `commit(last statements)`; otherwise it is committed after `body` returns. Any failure rolls it back and is
 * thrown; a statement that fails in a batch aborts the transaction, so a COMMIT sent behind it commits nothing.
 */
export async function pipelinedTransaction<T>(db: Database, body: (tx: PipelinedTransaction) => Promise<T>): Promise<T> {
  const connection = await reserveWithin(db, RESERVE_TIMEOUT_MS);
  const tx: { state: "new" | "open" | "done" } = { state: "new" };
  const batch = async (statements: readonly Statement[], commit: boolean): Promise<Row[][]> => {
    if (tx.state === "done") throw new Error("pipelined transaction already committed");
    assertSendable(statements);
    // postgres.js queries are lazy (sent when awaited): BEGIN is started first so it leaves first.
    const begin = tx.state === "new" ? connection.unsafe("BEGIN").then(() => []) : undefined;
    tx.state = "open";
    const sent = statements.map((s) => send(connection, s));
    const end = commit ? connection.unsafe("COMMIT").then(() => []) : undefined;
    const answers = await Promise.all([...(begin ? [begin] : []), ...sent, ...(end ? [end] : [])]);
    if (commit) tx.state = "done";
    return answers.slice(begin ? 1 : 0, (begin ? 1 : 0) + statements.length);
  };
  try {
    const result = await body({ run: (statements) => batch(statements, false), commit: (statements = []) => batch(statements, true) });
    if (tx.state === "open") await batch([], true);
    return result;
  } catch (error) {
    // A connection that is gone took its transaction with it (the server rolls back a session that ends); nothing
    // more may be written on the reserved handle, which the pool may be reconnecting for another query.
    if (tx.state === "open" && !connectionLost(error)) await connection.unsafe("ROLLBACK").catch(() => {});
    throw error;
  } finally {
    connection.release();
  }
}
