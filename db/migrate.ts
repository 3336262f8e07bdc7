import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { closeDatabase, createDatabase } from "./client";
import { isDatabaseOverloaded, isDatabaseUnavailable } from "./unavailable";

export const MIGRATIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "migrations");
/**
 * SQL functions that hold rules run inside PostgreSQL (e.g. create_sponsorship_request): one current source file
 * each, applied after the migrations with CREATE OR REPLACE, so a reader finds a rule by its name and a change is
 * made in one place. A signature is dropped only once no release still in service calls it.
 */
export const FUNCTIONS_FOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), "functions");
/**
 * The revision of db/functions/: raise it, and set FUNCTIONS_SHA256 to what db/migrate.test.ts prints, with every
 * change there. The database records the revision it holds (`installed_functions`), and a process whose revision
 * is older installs nothing: during a rolling deploy an old worker that restarts must not put back its older bodies
 * under the new code. So a body keeps answering the calls of the release before it (a field added, none taken away;
 * a new signature beside the old one), as a migration keeps the columns the release before it reads.
 */
export const FUNCTIONS_REVISION = 4;
export const FUNCTIONS_SHA256 = "8cc69fc302df6d68a29a09a4f25a927eb7f582e4b9c313aa2077fce5ef80a9dd";

export type FunctionSource = { name: string; source: string };

export function functionSources(folder = FUNCTIONS_FOLDER): FunctionSource[] {
  return readdirSync(folder)
    .filter((name) => name.endsWith(".sql"))
    .sort()
    .map((name) => ({ name, source: readFileSync(path.join(folder, name), "utf8") }));
}

/** sha256 over the sources' names and texts, in the order they are applied. */
export function functionsSha256(sources: FunctionSource[]): string {
  const hash = createHash("sha256");
  for (const { name, source } of sources) hash.update(`${name}\0${source}\0`);
  return hash.digest("hex");
}

/** What the database holds (`installed_functions`); undefined: nothing recorded yet. */
type Held = { revision: number; sha256: string; rolledBackFrom: number | null } | undefined;

export type MigrationResult = {
  /**
   * "installed": this release's bodies were written; "unchanged": they were in place already (nothing written, so
   * a restart takes no lock on the tables whose triggers the sources replace); "kept": another's were left.
   */
  functions: "installed" | "unchanged" | "kept";
  /** Why they were kept: a newer release's, or the operator rolled back to an older revision than this one. */
  keptBecause?: "newer" | "rolled_back";
  /** The revision the database holds afterwards. */
  revision: number;
  /** Installed over other sources of the same revision: edited by hand, or two releases share a revision. */
  sameRevisionReplaced?: true;
};

export type MigrationOptions = {
  /**
   * Who applies them. "start-up" (default: `npm start`, the worker) leaves a newer revision and an operator's
   * rollback in place; "operator" (`npm run db:migrate`, once per release) installs this release's unless a newer one
   * is in place, and ends a rollback.
   */
  by?: "start-up" | "operator";
  /** The operator rolls back to this release's bodies over a newer revision's; start-ups of that revision keep them. */
  rollBackFunctions?: boolean;
  /** Tests only: another folder of sources (with this release's revision). */
  functionsFolder?: string;
  /** How long a statement waits for a table's lock before it gives up (55P03); MIGRATION_LOCK_TIMEOUT_MS by default. */
  lockTimeoutMs?: number;
  /** Ends the wait for another process's migrations (a shutdown began): MigrationsStoppedError. */
  stopped?: () => boolean;
  /** Told, once and then every 10 s, that another session applies them (its pid, when PostgreSQL shows it). */
  onLockWait?: (holderPid: number | undefined, waitedMs: number) => void;
};

/**
 * How long a migration's or a function source's statement waits for a table's lock. ALTER TABLE and CREATE TRIGGER
 * wait behind any transaction that uses the table, and every statement that comes after queues behind them: a long
 * transaction (an operator's psql session left open, a report) held the whole service's writes for as long as it
 * lasted (the web server's own lock_timeout then answered 503). Now the migrations give up after this long, every
 * change of theirs rolled back, and applyMigrationsWhenReachable tries again later, leaving the service gaps to run.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 5_000;

const LOCK_KEY = "sponsorship-migrations";

/** The wait for another process's migrations was ended (`stopped`): nothing was applied by this one. */
export class MigrationsStoppedError extends Error {
  override name = "MigrationsStoppedError";
}

function decide(held: Held, sha256: string, options: MigrationOptions): Omit<MigrationResult, "revision"> & { rolledBackFrom?: number | null } {
  const own = FUNCTIONS_REVISION;
  const inPlace = held !== undefined && held.revision === own && held.sha256 === sha256;
  if (options.rollBackFunctions) {
    // Its own bodies in place already (npm start on the embedded database, every start): nothing to write.
    if (inPlace) return { functions: "unchanged" };
    return { functions: "installed", rolledBackFrom: held && held.revision > own ? held.revision : (held?.rolledBackFrom ?? null) };
  }
  if (!held) return { functions: "installed", rolledBackFrom: null };
  if (held.revision > own) return { functions: "kept", keptBecause: "newer" };
  if (options.by === "operator") return { functions: "installed", rolledBackFrom: null };
  // A start-up of a revision the operator rolled back from (a newer process restarting): the rollback stands.
  if (held.rolledBackFrom !== null && own > held.revision && own <= held.rolledBackFrom) return { functions: "kept", keptBecause: "rolled_back" };
  if (inPlace) return { functions: "unchanged" };
  return {
    functions: "installed",
    rolledBackFrom: held.rolledBackFrom !== null && own <= held.rolledBackFrom ? held.rolledBackFrom : null,
    ...(held.revision === own ? { sameRevisionReplaced: true as const } : {}),
  };
}

/**
 * Applies the committed migrations and then db/functions/, once even when several processes start together
 * (advisory lock): the bodies and the record of their revision in one transaction, or nothing.
 */
export async function applyMigrations(url: string, options: MigrationOptions = {}): Promise<MigrationResult> {
  const db = createDatabase(url, {
    max: 1,
    applicationName: "sponsorship-migrate",
    lockTimeoutMs: options.lockTimeoutMs ?? MIGRATION_LOCK_TIMEOUT_MS,
  });
  try {
    // One connection (max: 1), so the session lock covers the migrator's statements.
    await takeMigrationLock(db, options);
    try {
      await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
      const [held] = await db.$client<NonNullable<Held>[]>`
        SELECT revision, sha256, rolled_back_from AS "rolledBackFrom" FROM installed_functions WHERE id = 1`;
      const sources = functionSources(options.functionsFolder);
      const sha256 = functionsSha256(sources);
      const { rolledBackFrom, ...decision } = decide(held, sha256, options);
      if (decision.functions !== "installed") return { ...decision, revision: held!.revision };
      await db.$client.begin(async (tx) => {
        for (const { source } of sources) await tx.unsafe(source).simple();
        await tx`
          INSERT INTO installed_functions (id, revision, sha256, rolled_back_from)
          VALUES (1, ${FUNCTIONS_REVISION}, ${sha256}, ${rolledBackFrom ?? null})
          ON CONFLICT (id) DO UPDATE SET revision = EXCLUDED.revision, sha256 = EXCLUDED.sha256,
            rolled_back_from = EXCLUDED.rolled_back_from, installed_at = now()`;
      });
      return { ...decision, revision: FUNCTIONS_REVISION };
    } finally {
      await db.$client`SELECT pg_advisory_unlock(hashtext(${LOCK_KEY}))`;
    }
  } finally {
    await closeDatabase(db);
  }
}

/**
 * The session lock that makes one process at a time apply them, asked for without waiting, again and again: a plain
 * pg_advisory_lock waited for ever and silently (the lock_timeout above would instead fail a long migration of
 * another process), and a shutdown could not end the wait.
 */
async function takeMigrationLock(db: ReturnType<typeof createDatabase>, options: MigrationOptions): Promise<void> {
  const started = performance.now();
  let toldAt: number | undefined;
  for (let attempt = 0; ; attempt++) {
    const [row] = await db.$client<{ got: boolean }[]>`SELECT pg_try_advisory_lock(hashtext(${LOCK_KEY})) AS got`;
    if (row!.got) return;
    if (options.stopped?.()) throw new MigrationsStoppedError("stopped while another process applied the migrations");
    const now = performance.now();
    if (toldAt === undefined || now - toldAt >= 10_000) {
      toldAt = now;
      // The key as pg_locks shows an int4 widened to the lock's int8: the high half in classid, the low in objid.
      const [holder] = await db.$client<{ pid: number }[]>`
        SELECT l.pid FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((l.classid::int8 << 32) | l.objid::int8) = hashtext(${LOCK_KEY})::int8
        LIMIT 1`;
      options.onLockWait?.(holder?.pid, Math.round(now - started));
    }
    await new Promise((r) => setTimeout(r, Math.min(1_000, 50 * 2 ** attempt)));
  }
}

/**
 * applyMigrations, waiting out a database that cannot be reached for now (isDatabaseUnavailable: refused, reset,
 * starting up) or a table's lock it could not get in time (another session's transaction uses the table:
 * MIGRATION_LOCK_TIMEOUT_MS) for up to `giveUpMs`, with a backoff from 500 ms to 5 s; any other failure at once. For npm start:
 * the embedded PostgreSQL killed during the migrations comes back by itself (supervised), and npm start used to end
 * there ("start-up failed ... ECONNRESET"). Safe to repeat: the migrations and the functions each go in one
 * transaction, under an advisory lock. `stopped` ends the wait (a shutdown began).
 */
export async function applyMigrationsWhenReachable(
  url: string,
  options: MigrationOptions & { giveUpMs?: number; stopped?: () => boolean; onWait?: (error: unknown, waitMs: number) => void } = {},
): Promise<MigrationResult> {
  const deadline = performance.now() + (options.giveUpMs ?? 120_000);
  for (let attempt = 0; ; attempt++) {
    try {
      return await applyMigrations(url, options);
    } catch (error) {
      const passing = isDatabaseUnavailable(error) || isDatabaseOverloaded(error);
      if (!passing || options.stopped?.() || performance.now() > deadline) throw error;
      const waitMs = Math.min(5_000, 500 * 2 ** attempt);
      options.onWait?.(error, waitMs);
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}

/** What a process logs about the functions it did not install, or installed over the same revision; undefined: nothing. */
export function functionsNotice(result: MigrationResult): { message: string; fields: Record<string, number> } | undefined {
  const fields = { heldRevision: result.revision, revision: FUNCTIONS_REVISION };
  if (result.keptBecause === "newer") {
    return { message: "db/functions/ left in place: the database holds a newer revision (expected while a rolling deploy replaces this process)", fields };
  }
  if (result.keptBecause === "rolled_back") {
    return { message: "db/functions/ left in place: the operator rolled them back from this revision (npm run db:migrate ends that)", fields };
  }
  if (result.sameRevisionReplaced) {
    return { message: "db/functions/ installed over other sources of the same revision: edited by hand, or two releases share a revision", fields };
  }
  return undefined;
}

// `npm run db:migrate [-- --roll-back-functions]` against DATABASE_URL.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const url = process.env.DATABASE_URL;
  const flags = process.argv.slice(2);
  const unknown = flags.find((flag) => flag !== "--roll-back-functions");
  if (!url || unknown) {
    console.error(unknown ? `db:migrate: unknown option ${unknown} (only --roll-back-functions)` : "db:migrate: DATABASE_URL is not set");
    process.exit(1);
  }
  applyMigrationsWhenReachable(url, {
    by: "operator",
    rollBackFunctions: flags.includes("--roll-back-functions"),
    onWait: (error, waitMs) =>
      console.error(`db:migrate: ${error instanceof Error ? error.message : String(error)}; trying again in ${(waitMs / 1000).toFixed(1)} s`),
    onLockWait: (holderPid, waitedMs) =>
      console.error(
        `db:migrate: waiting for another process that applies the migrations${holderPid ? ` (PostgreSQL pid ${holderPid})` : ""}, ${Math.round(waitedMs / 1000)} s so far`,
      ),
  }).then(
    (result) => {
      if (result.functions === "kept") {
        console.error(
          `db:migrate: the database holds db/functions/ revision ${result.revision}, newer than this release's ${FUNCTIONS_REVISION}: left in place. ` +
            "To roll back to this release's, stop every process of the newer release first, then run npm run db:migrate -- --roll-back-functions",
        );
      }
      console.log(`migrations applied; db/functions/ revision ${result.revision} ${result.functions === "kept" ? "kept" : "in place"}`);
    },
    (error: unknown) => {
      console.error(`db:migrate: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
}
