import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import * as schema from "./schema";

export type Database = PostgresJsDatabase<typeof schema> & { $client: postgres.Sql };

export type DatabaseOptions = {
  /** Pool size of this process. */
  max?: number;
  /** A name shown in pg_stat_activity. */
  applicationName?: string;
  /**
   * The server ends a session left idle inside a transaction this long (its locks are released). For processes
   * whose transactions hold locks others wait for, so a frozen process (SIGSTOP, a paused container) cannot
   * hold them for ever. Unset: no limit.
   */
  idleInTransactionTimeoutMs?: number;
  /** The server cancels a statement running longer than this (SQLSTATE 57014). Unset: no limit. */
  statementTimeoutMs?: number;
  /** The server cancels a statement waiting longer than this for a lock (SQLSTATE 55P03). Unset: no limit. */
  lockTimeoutMs?: number;
  /** Seconds to wait for a new connection before giving up (postgres.js `connect_timeout`, default 30). */
  connectTimeoutSeconds?: number;
  /**
   * The client gives a connection up when a statement waits for its answer and the server has sent nothing for this
   * long: a partition or a frozen server, where no reset ever comes (TCP would retransmit for about 15 minutes). What
   * waits on it fails with ANSWER_TIMEOUT (an outage, db/unavailable.ts) and the pool opens a new connection for the
   * next statement. PostgreSQL sends a statement's rows when it ends, so this must exceed the longest statement
   * (and the time to send it): set it above `statementTimeoutMs` (the server's own bound) and commit's disk flush.
   * COPY and cursors are not timed. Unset: no limit. (The `answer_timeout` of scripts/patch-postgres.mjs.)
   */
  answerTimeoutMs?: number;
};

/**
 * A Drizzle database over its own postgres.js pool. Close it with `closeDatabase`. The caller passes the URL: the
 * web process's pool is lib/http/app-context.ts `appDb()`, the worker's is worker/worker.ts's, tests' test/db.ts.
 */
export function createDatabase(url: string, options: DatabaseOptions = {}): Database {
  const settings: postgres.Options<Record<string, never>> & { answer_timeout?: number } = {
    max: options.max ?? 10,
    onnotice: () => {},
    ...(options.connectTimeoutSeconds ? { connect_timeout: options.connectTimeoutSeconds } : {}),
    ...(options.answerTimeoutMs ? { answer_timeout: options.answerTimeoutMs / 1000 } : {}),
    connection: {
      application_name: options.applicationName ?? "sponsorship",
      ...(options.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs } : {}),
      ...(options.statementTimeoutMs ? { statement_timeout: options.statementTimeoutMs } : {}),
      ...(options.lockTimeoutMs ? { lock_timeout: options.lockTimeoutMs } : {}),
    },
    // Timestamps are timestamptz(3): postgres.js returns them as Date.
  };
  const client = postgres(url, settings);
  return drizzle({ client, schema }) as Database;
}

export async function closeDatabase(db: Database): Promise<void> {
  await db.$client.end({ timeout: 5 });
}
