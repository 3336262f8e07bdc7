import type { SQL } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import type postgres from "postgres";
import type { Database } from "@/db/client";

/**
 * The one way raw SQL runs (pg-boss's shape: query files build statements, one runner executes them). A query file
 * builds a `Statement` (fixed text and parameters) or a `Query<T>` (a statement and how to read its rows), from
 * text or from a Drizzle `sql` template; `run` executes one, `runTogether` several at once, and
 * `./transaction.ts` runs them in a pipelined transaction. Drizzle's typed builders (`db.select()...`) stay for the
 * dashboard's table reads and writes, where their typing is the point and no path is hot.
 *
 * Every statement runs as a named prepared statement. Drizzle's `execute` sends every parameterised statement
 * unnamed, so postgres.js first asks the server for the parameter types (an extra round trip) and the server parses
 * and plans it again each time; for the hot paths (request creation and reads, /health, the worker) that was most
 * of their database time. postgres.js caches the prepared statement per connection by its text, so each distinct
 * text is parsed once per connection; lists travel as array parameters, so the text does not depend on a batch's size.
 */

/** A transaction opened with `db.transaction(...)`. */
export type Transaction = Parameters<Parameters<Database["transaction"]>[0]>[0];

/** Where a query runs: the pool or an open transaction. */
export type Executor = Database | Transaction;

export type Row = Record<string, unknown>;

/** A statement whose text is built once; only the parameters vary. */
export type Statement = { text: string; params: readonly unknown[] };

/** A statement whose answer is mapped: `parse` gets its rows. */
export type Query<T> = Statement & { parse: (rows: Row[]) => T };

/** What the runner accepts: a statement, a query, or a Drizzle `sql` template (turned into a statement). */
export type Runnable = Statement | SQL;

const dialect = new PgDialect();

/** A Drizzle `sql` template as a statement (its text and parameters). */
export function statement(input: Runnable): Statement {
  if ("text" in input) return input;
  const { sql, params } = dialect.sqlToQuery(input);
  return { text: sql, params };
}

/** A query: a statement (text or Drizzle `sql`) and how its rows become the answer. */
export function query<T>(input: Runnable, parse: (rows: Row[]) => T): Query<T>;
export function query<T>(text: string, params: readonly unknown[], parse: (rows: Row[]) => T): Query<T>;
export function query<T>(input: Runnable | string, paramsOrParse: readonly unknown[] | ((rows: Row[]) => T), parse?: (rows: Row[]) => T): Query<T> {
  if (typeof input === "string") return { text: input, params: paramsOrParse as readonly unknown[], parse: parse! };
  return { ...statement(input), parse: paramsOrParse as (rows: Row[]) => T };
}

/** The rows of a Drizzle `sql` template, typed (a query whose answer is its rows). */
export function rowsOf<T extends object>(input: Runnable): Query<T[]> {
  return query(input, (rows) => rows as T[]);
}

/** The postgres.js client under a Drizzle database or transaction (the pool, or the transaction's connection). */
export function clientOf(db: Executor): postgres.Sql {
  // Drizzle keeps its session public at runtime but not in its types; the session holds the postgres.js client.
  return (db as unknown as { session: { client: postgres.Sql } }).session.client;
}

/**
 * postgres.js refuses an undefined parameter (or array element) on the client, without sending the statement: the
 * server's transaction is then not aborted, so statements pipelined behind it, and a COMMIT, still run (a partial
 * commit), and once the statements are prepared on the connection postgres.js rejects the wrong query and its
 * answers go out of step (the transaction never settles). Checked for a whole batch before any of it is sent.
 */
export function assertSendable(statements: readonly Statement[]): void {
  for (const s of statements) {
    for (const [i, p] of s.params.entries()) {
      if (p === undefined || (Array.isArray(p) && p.includes(undefined))) {
        throw new TypeError(`undefined value in parameter $${i + 1} of: ${s.text.trim().replace(/\s+/g, " ").slice(0, 80)}`);
      }
    }
  }
}

/** Sends one statement on a client (the pool, a transaction's connection, a reserved connection). */
export function send(client: postgres.Sql | postgres.ReservedSql, s: Statement): Promise<Row[]> {
  return client.unsafe<Row[]>(s.text, s.params as postgres.ParameterOrJSON<never>[], { prepare: true }).then((rows) => rows);
}

export type Answers<T extends readonly Query<unknown>[]> = { -readonly [K in keyof T]: T[K] extends Query<infer R> ? R : never };

/** Runs one query (its parsed answer) or statement (its rows). */
export async function run<T>(db: Executor, q: Query<T>): Promise<T>;
export async function run<R extends object = Row>(db: Executor, q: Runnable): Promise<R[]>;
export async function run(db: Executor, q: Runnable | Query<unknown>): Promise<unknown> {
  const s = statement(q);
  assertSendable([s]);
  const rows = await send(clientOf(db), s);
  return "parse" in q ? q.parse(rows) : rows;
}

/**
 * Runs queries together and parses each answer: pipelined on one connection inside a transaction (each statement
 * sees what the previous ones did), on any free connections of the pool otherwise.
 */
export async function runTogether<const T extends readonly Query<unknown>[]>(db: Executor, queries: T): Promise<Answers<T>> {
  const client = clientOf(db);
  assertSendable(queries);
  const answers = await Promise.all(queries.map((q) => send(client, q)));
  return queries.map((q, i) => q.parse(answers[i]!)) as Answers<T>;
}
