import { closeDatabase, createDatabase, type Database } from "@/db/client";
import { getConfig, type Config } from "@/lib/config";

/**
 * What the route handlers run against: the configuration and the database pool of the web process. Tests replace
 * both (`setAppContextForTests`) and call the handlers directly.
 *
 * The pool lives on `globalThis`: Next bundles the route handlers into its own module graph, so server.ts (which
 * runs outside it) reaches the same pool through the global to close it on shutdown.
 */

const POOL_KEY = Symbol.for("gas-sponsorship.web.database");
type Global = typeof globalThis & { [POOL_KEY]?: Database };
const global = globalThis as Global;

/**
 * The web pool's limits (issue 11): a statement runs at most 5 s and waits at most 2 s for a lock, a session idle
 * inside a transaction is ended after 10 s, a new connection gets 5 s, and a connection on which a statement has
 * heard nothing from the server for 15 s is given up (a partition or a frozen server, where no reset comes: the
 * server's own limits cannot act, and TCP would wait about 15 minutes). A request handler never needs longer; a
 * stuck one must not hold a connection, a lock or a client. The worker's pools set their own (worker/).
 */
export const WEB_POOL_LIMITS = {
  statementTimeoutMs: 5_000,
  lockTimeoutMs: 2_000,
  idleInTransactionTimeoutMs: 10_000,
  connectTimeoutSeconds: 5,
  answerTimeoutMs: 15_000,
} as const;

let overrides: { db?: Database; config?: Config } = {};

export function appConfig(): Config {
  return overrides.config ?? getConfig();
}

/** The web process's pool, created on first use from DATABASE_URL. */
export function appDb(): Database {
  if (overrides.db) return overrides.db;
  let db = global[POOL_KEY];
  if (!db) {
    const { databaseUrl: url, databasePoolSize } = appConfig();
    if (!url) throw new Error("DATABASE_URL is not set: start the service with `npm start`, which provides it");
    db = createDatabase(url, { max: databasePoolSize, applicationName: "sponsorship-web", ...WEB_POOL_LIMITS });
    global[POOL_KEY] = db;
  }
  return db;
}

/** Closes the web process's pool (server.ts, on shutdown). Safe when none was opened. */
export async function closeAppDb(): Promise<void> {
  const db = global[POOL_KEY];
  global[POOL_KEY] = undefined;
  if (db) await closeDatabase(db);
}

/** Tests only: run the handlers against this database and configuration (`{}` restores the defaults). */
export function setAppContextForTests(next: { db?: Database; config?: Config }): void {
  overrides = { ...next };
}
