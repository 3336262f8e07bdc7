import { execFile } from "node:child_process";
import { cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import {
  applyMigrations,
  applyMigrationsWhenReachable,
  FUNCTIONS_FOLDER,
  FUNCTIONS_REVISION as OWN,
  FUNCTIONS_SHA256,
  functionSources,
  functionsNotice,
  functionsSha256,
  MigrationsStoppedError,
} from "./migrate";

// A body another release installed: client_ip_blocked's, answering the same, with a mark to find it by.
const OTHER_BODY = `
  CREATE OR REPLACE FUNCTION client_ip_blocked(p_client_net cidr) RETURNS boolean AS $$
    SELECT EXISTS (SELECT 1 FROM ip_blocks b WHERE b.lifted_at IS NULL AND b.cidr && p_client_net) /* another release */;
  $$ LANGUAGE sql STABLE;`;

describe("db/functions/ and their revision (db/migrate.ts)", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  const othersInstalled = async () => {
    const [row] = await t.db.$client<{ src: string }[]>`SELECT prosrc AS src FROM pg_proc WHERE proname = 'client_ip_blocked'`;
    return row!.src.includes("another release");
  };
  const held = async () => {
    const [row] = await t.db.$client<{ revision: number; sha256: string; rolledBackFrom: number | null }[]>`
      SELECT revision, sha256, rolled_back_from AS "rolledBackFrom" FROM installed_functions`;
    return row;
  };
  /** Another release's bodies in place, recorded as `revision` (undefined: no record, as before migration 0010). */
  const installedBy = async (revision: number | undefined, rolledBackFrom: number | null = null) => {
    await t.db.$client.unsafe(OTHER_BODY);
    await t.db.$client`DELETE FROM installed_functions`;
    if (revision !== undefined) {
      await t.db.$client`INSERT INTO installed_functions (revision, sha256, rolled_back_from) VALUES (${revision}, 'other', ${rolledBackFrom})`;
    }
  };
  const ours = { revision: OWN, sha256: FUNCTIONS_SHA256, rolledBackFrom: null };

  it("pins db/functions/ by FUNCTIONS_SHA256: a change there fails here until FUNCTIONS_REVISION is raised and the hash set", () => {
    const sha = functionsSha256(functionSources());
    expect(sha, `db/functions/ changed: raise FUNCTIONS_REVISION in db/migrate.ts and set FUNCTIONS_SHA256 to "${sha}"`).toBe(FUNCTIONS_SHA256);
  });

  it("records the revision it installed", async () => {
    expect(await held()).toEqual(ours);
  });

  describe("at a process's start-up", () => {
    beforeEach(async () => {
      await applyMigrations(t.url, { by: "operator" });
    });

    it("writes nothing when its own are in place already (no lock on the tables whose triggers the sources replace)", async () => {
      const [before] = await t.db.$client<{ at: Date }[]>`SELECT installed_at AS at FROM installed_functions`;
      expect(await applyMigrations(t.url)).toEqual({ functions: "unchanged", revision: OWN });
      const [after] = await t.db.$client<{ at: Date }[]>`SELECT installed_at AS at FROM installed_functions`;
      expect(after!.at).toEqual(before!.at);
    });

    it("leaves a newer release's bodies in place (an old worker restarting during a rolling deploy)", async () => {
      await installedBy(OWN + 1);

      const result = await applyMigrations(t.url);

      expect(result).toEqual({ functions: "kept", keptBecause: "newer", revision: OWN + 1 });
      expect(await othersInstalled()).toBe(true);
      expect(await held()).toEqual({ revision: OWN + 1, sha256: "other", rolledBackFrom: null });
      expect(functionsNotice(result)).toEqual({
        message: "db/functions/ left in place: the database holds a newer revision (expected while a rolling deploy replaces this process)",
        fields: { heldRevision: OWN + 1, revision: OWN },
      });
    });

    it("leaves an operator's rollback from its revision in place (a process of the release rolled back from, restarting)", async () => {
      await installedBy(OWN - 1, OWN);

      const result = await applyMigrations(t.url);

      expect(result).toEqual({ functions: "kept", keptBecause: "rolled_back", revision: OWN - 1 });
      expect(await othersInstalled()).toBe(true);
      expect(functionsNotice(result)?.message).toBe(
        "db/functions/ left in place: the operator rolled them back from this revision (npm run db:migrate ends that)",
      );
    });

    it.each([
      ["an older release's", OWN - 1, null],
      ["a rollback from an older revision than its own (a later release)", OWN - 2, OWN - 1],
      ["no record's (a database from before the record)", undefined, null],
    ])("puts its own bodies over %s and records its revision", async (_, revision, rolledBackFrom) => {
      await installedBy(revision, rolledBackFrom);

      const result = await applyMigrations(t.url);

      expect(result).toEqual({ functions: "installed", revision: OWN });
      expect(functionsNotice(result)).toBeUndefined();
      expect(await othersInstalled()).toBe(false);
      expect(await held()).toEqual(ours);
    });

    it("puts its own over other sources of its revision, and says so (edited by hand, or two releases share a revision)", async () => {
      await installedBy(OWN);

      const result = await applyMigrations(t.url);

      expect(result).toEqual({ functions: "installed", revision: OWN, sameRevisionReplaced: true });
      expect(functionsNotice(result)?.message).toBe(
        "db/functions/ installed over other sources of the same revision: edited by hand, or two releases share a revision",
      );
      expect(await othersInstalled()).toBe(false);
      expect(await held()).toEqual(ours);
    });

    it("installs all of its sources or none: one that fails leaves the bodies and the record as they were", async () => {
      const folder = await mkdtemp(path.join(tmpdir(), "functions-"));
      try {
        await writeFile(path.join(folder, "a.sql"), OTHER_BODY);
        await writeFile(path.join(folder, "b.sql"), "CREATE OR REPLACE FUNCTION broken() RETURNS int AS $$ SELEC 1 $$ LANGUAGE sql;");

        await expect(applyMigrations(t.url, { functionsFolder: folder })).rejects.toMatchObject({ code: "42601" });

        expect(await othersInstalled()).toBe(false);
        expect(await held()).toEqual(ours);
      } finally {
        await rm(folder, { recursive: true, force: true });
      }
    });
  });

  describe("by the operator (npm run db:migrate)", () => {
    it("leaves a newer release's bodies in place too", async () => {
      await installedBy(OWN + 1);
      expect(await applyMigrations(t.url, { by: "operator" })).toEqual({ functions: "kept", keptBecause: "newer", revision: OWN + 1 });
      expect(await othersInstalled()).toBe(true);
    });

    it("rolls back to this release's bodies when told, and records the revision rolled back from (whose start-ups then keep them, above)", async () => {
      await installedBy(OWN + 1);

      expect(await applyMigrations(t.url, { by: "operator", rollBackFunctions: true })).toEqual({ functions: "installed", revision: OWN });
      expect(await othersInstalled()).toBe(false);
      expect(await held()).toEqual({ ...ours, rolledBackFrom: OWN + 1 });
      // Told again: still rolled back from the newer revision.
      await applyMigrations(t.url, { by: "operator", rollBackFunctions: true });
      expect(await held()).toEqual({ ...ours, rolledBackFrom: OWN + 1 });
    });

    it("writes nothing when told to roll back onto its own bodies (npm start on the embedded database, every start)", async () => {
      await applyMigrations(t.url, { by: "operator" });
      expect(await applyMigrations(t.url, { rollBackFunctions: true })).toEqual({ functions: "unchanged", revision: OWN });
    });

    it("ends a rollback by installing its own release's bodies", async () => {
      await installedBy(OWN - 1, OWN);

      expect(await applyMigrations(t.url, { by: "operator" })).toEqual({ functions: "installed", revision: OWN });
      expect(await othersInstalled()).toBe(false);
      expect(await held()).toEqual(ours);
    });

    it("is run as `npm run db:migrate`, which says what it did and rolls back only when told", async () => {
      const cli = async (...args: string[]) => {
        const run = promisify(execFile)(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "migrate.ts"), ...args], {
          env: { ...process.env, DATABASE_URL: t.url },
        });
        return run.then(
          ({ stdout, stderr }) => ({ code: 0, out: stdout.trim(), err: stderr.trim() }),
          (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, out: error.stdout.trim(), err: error.stderr.trim() }),
        );
      };
      await installedBy(OWN + 1);

      expect(await cli("--roll-back")).toEqual({ code: 1, out: "", err: "db:migrate: unknown option --roll-back (only --roll-back-functions)" });
      expect(await cli()).toEqual({
        code: 0,
        out: `migrations applied; db/functions/ revision ${OWN + 1} kept`,
        err:
          `db:migrate: the database holds db/functions/ revision ${OWN + 1}, newer than this release's ${OWN}: left in place. ` +
          "To roll back to this release's, stop every process of the newer release first, then run npm run db:migrate -- --roll-back-functions",
      });
      expect(await held()).toEqual({ revision: OWN + 1, sha256: "other", rolledBackFrom: null });
      expect(await cli("--roll-back-functions")).toEqual({ code: 0, out: `migrations applied; db/functions/ revision ${OWN} in place`, err: "" });
      expect(await held()).toEqual({ ...ours, rolledBackFrom: OWN + 1 });
      expect(await cli()).toEqual({ code: 0, out: `migrations applied; db/functions/ revision ${OWN} in place`, err: "" });
      expect(await held()).toEqual(ours);
    });
  });

  describe("waiting for locks", () => {
    let other: postgres.Sql;
    beforeEach(() => {
      other = postgres(t.url, { max: 2, onnotice: () => {} });
    });
    afterEach(async () => {
      await other.end();
      await applyMigrations(t.url, { by: "operator" });
    });

    /** This release's sources with one changed (a comment), so a start-up installs them over the same revision. */
    const editedSources = async () => {
      const folder = await mkdtemp(path.join(tmpdir(), "functions-"));
      await cp(FUNCTIONS_FOLDER, folder, { recursive: true });
      await writeFile(path.join(folder, "sponsorship_requests_audit.sql"), "-- edited\n", { flag: "a" });
      return folder;
    };
    /** A transaction of another session that writes sponsorship_requests, open until `release` is called. */
    const holdTable = async () => {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const done = other.begin(async (tx) => {
        await tx`LOCK TABLE sponsorship_requests IN ROW EXCLUSIVE MODE`;
        locked();
        await released;
      });
      await isLocked;
      return { release: () => (release(), done) };
    };

    it("gives a table's lock up after the lock timeout, with nothing changed, and applies them once the table is free", async () => {
      const folder = await editedSources();
      try {
        const holder = await holdTable();
        // CREATE TRIGGER on sponsorship_requests waits behind the open transaction, and every write after it behind
        // both: given up rather than held for as long as that transaction lasts.
        await expect(applyMigrations(t.url, { functionsFolder: folder, lockTimeoutMs: 200 })).rejects.toMatchObject({ code: "55P03" });
        expect(await held()).toEqual(ours);

        const waits: number[] = [];
        const result = await applyMigrationsWhenReachable(t.url, {
          functionsFolder: folder,
          lockTimeoutMs: 200,
          onWait: (_error, waitMs) => {
            waits.push(waitMs);
            void holder.release();
          },
        });
        expect(waits).toEqual([500]);
        expect(result).toEqual({ functions: "installed", revision: OWN, sameRevisionReplaced: true });
        expect((await held())!.sha256).toBe(functionsSha256(functionSources(folder)));
      } finally {
        await rm(folder, { recursive: true, force: true });
      }
    });

    it("waits for another process that applies them, says which, and a shutdown ends the wait with nothing done", async () => {
      const holder = await other.reserve();
      try {
        const [row] = await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
        const pid = row!.pid;
        await holder`SELECT pg_advisory_lock(hashtext('sponsorship-migrations'))`;

        let stop = false;
        const told: Array<number | undefined> = [];
        const stopped = applyMigrations(t.url, {
          stopped: () => stop,
          onLockWait: (holderPid) => {
            told.push(holderPid);
            stop = true;
          },
        });
        await expect(stopped).rejects.toBeInstanceOf(MigrationsStoppedError);
        expect(told).toEqual([pid]);

        // Lazy in postgres.js until executed (or awaited).
        const result = applyMigrations(t.url, { onLockWait: () => void holder`SELECT pg_advisory_unlock(hashtext('sponsorship-migrations'))`.execute() });
        expect(await result).toEqual({ functions: "unchanged", revision: OWN });
      } finally {
        holder.release();
      }
    });
  });
});
