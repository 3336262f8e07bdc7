import type postgres from "postgres";
import type { Database } from "@/db/client";
import { withTimeout } from "@/lib/with-timeout";
import { assertSendable, send, statement, type Answers, type Query, type Row, type Runnable, type Statement } from "./run";

/**
 * The runner's transaction (./run.ts runs single statements): a transaction on one reserved connection whose
 * statements leave in batches. BEGIN leaves with the first batch and COMMIT with the last: statements that do not
 * depend on each other's answers leave together (pipelined: still executed one after the other, each seeing what the
 * previous ones did), so a transaction costs one round trip per decision the client makes rather than one per
 * statement (`db.transaction` costs one per statement plus BEGIN and COMMIT): `pipelinedTransaction(db, body)`, where
 * `body` sends batches with `tx.run` / `tx.send` and may end with `tx.commit`. (A path whose whole decision can run in
 * the database is one statement instead: creation and registration call SQL functions, db/functions/.)
 * If any statement fails, the transaction is rolled back and the error is thrown; a statement that fails in a batch
 * aborts the transaction, so a COMMIT sent behind it commits nothing.
 */

export type { Row, Statement };

export type PipelinedTransaction = {
  /** Sends the statements together (after BEGIN, the first time) and waits for every answer. */
  run: (statements: readonly Runnable[]) => Promise<Row[][]>;
  /** Sends the statements together with COMMIT; the transaction is over when this resolves. */
  commit: (statements?: readonly Runnable[]) => Promise<Row[][]>;
  /** `run` (or `commit` with `commit: true`) for queries, each answer parsed. */
  send: <const T extends readonly Query<unknown>[]>(queries: T, options?: { commit?: boolean }) => Promise<Answers<T>>;
};

const LOST_CONNECTION_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "ANSWER_TIMEOUT", "ECONNRESET", "EPIPE", "ETIMEDOUT"]);

/** The connection itself failed (dropped, reset, ended, or the server terminated the session). */
function connectionLost(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && (LOST_CONNECTION_CODES.has(code) || /^57P0[123]$/.test(code));
}

/** performance.now() of the last batch of a pipelined transaction answered (or failed) on each pool. */
const answeredAt = new WeakMap<Database, number>();

/**
 * When a pipelined transaction on `db` last got an answer, success or error (performance.now(); undefined before
 * the first): the worker's stages are the only users, and its stage deadline counts from it (worker/loop.ts).
 */
export function lastTransactionAnswerAt(db: Database): number | undefined {
  return answeredAt.get(db);
}

/** How long a transaction waits for a connection of the pool before it fails as an outage. */
export const RESERVE_TIMEOUT_MS = 15_000;

/**
 * A reserved connection, or a CONNECT_TIMEOUT error after `ms`. postgres.js 3.4.9 dropped a reserve that was
 * queued when a connection closed (its reconnect took it out of the queue and forgot it), which left a worker stuck
 * in a stage after a database outage until this bound was added; scripts/patch-postgres.mjs now keeps it queued.
 * The bound stays for any path still unknown: a caller then fails as in any outage and tries again with a new
 * reserve; the abandoned one, should it ever be granted, is released at once.
 */
function reserveWithin(db: Database, ms: number): Promise<postgres.ReservedSql> {
  const reserving = db.$client.reserve();
  return withTimeout(reserving, ms, () => {
    reserving.then(
      (late) => late.release(),
      () => {},
    );
    return Object.assign(new Error(`no database connection within ${ms} ms`), { code: "CONNECT_TIMEOUT" });
  });
}

/**
 * A transaction on one reserved connection whose statements leave in batches (see above). `body` may end it with
 * `commit(last statements)`; otherwise it is committed after `body` returns. Any failure rolls it back and is thrown.
 */
export async function pipelinedTransaction<T>(db: Database, body: (tx: PipelinedTransaction) => Promise<T>): Promise<T> {
  const connection = await reserveWithin(db, RESERVE_TIMEOUT_MS);
  const tx: { state: "new" | "open" | "done" } = { state: "new" };
  const batch = async (runnables: readonly Runnable[], commit: boolean): Promise<Row[][]> => {
    if (tx.state === "done") throw new Error("pipelined transaction already committed");
    const statements = runnables.map(statement);
    assertSendable(statements);
    // postgres.js queries are lazy (sent when awaited): BEGIN is started first so it leaves first.
    const begin = tx.state === "new" ? connection.unsafe("BEGIN").then(() => []) : undefined;
    tx.state = "open";
    const sent = statements.map((s) => send(connection, s));
    const end = commit ? connection.unsafe("COMMIT").then(() => []) : undefined;
    const answers = await Promise.all([...(begin ? [begin] : []), ...sent, ...(end ? [end] : [])]).finally(() => answeredAt.set(db, performance.now()));
    if (commit) tx.state = "done";
    return answers.slice(begin ? 1 : 0, (begin ? 1 : 0) + statements.length);
  };
  const handle: PipelinedTransaction = {
    run: (statements) => batch(statements, false),
    commit: (statements = []) => batch(statements, true),
    send: async (queries, options = {}) => {
      const answers = await batch(queries, options.commit === true);
      return queries.map((q, i) => q.parse(answers[i]!)) as Answers<typeof queries>;
    },
  };
  try {
    const result = await body(handle);
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
