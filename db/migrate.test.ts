import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { applyMigrations, FUNCTIONS_REVISION, FUNCTIONS_SHA256, functionSources, functionsSha256, keptFunctionsWarning } from "./migrate";

// A body another release installed: client_ip_blocked's, answering the same, with a mark to find it by.
const OTHER_BODY = `
  CREATE OR REPLACE FUNCTION client_ip_blocked(p_client_net cidr) RETURNS boolean AS $$
    SELECT EXISTS (SELECT 1 FROM ip_blocks b WHERE b.lifted_at IS NULL AND b.cidr && p_client_net) /* another release */;
  $$ LANGUAGE sql STABLE`;

describe("db/functions/ and their revision (db/migrate.ts)", () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase();
  });
  afterAll(async () => {
    await t?.drop();
  });

  const body = async () => {
    const [row] = await t.db.$client<{ src: string }[]>`SELECT prosrc AS src FROM pg_proc WHERE proname = 'client_ip_blocked'`;
    return row!.src;
  };
  const held = async () => {
    const [row] = await t.db.$client<{ revision: number; sha256: string }[]>`SELECT revision, sha256 FROM installed_functions`;
    return row;
  };

  it("names the committed sources by FUNCTIONS_SHA256: a change there raises FUNCTIONS_REVISION", () => {
    const sha = functionsSha256(functionSources());
    expect(sha, `db/functions/ changed: raise FUNCTIONS_REVISION in db/migrate.ts and set FUNCTIONS_SHA256 to "${sha}"`).toBe(FUNCTIONS_SHA256);
  });

  it("records the revision it installed", async () => {
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION, sha256: FUNCTIONS_SHA256 });
  });

  it("leaves a newer release's bodies in place (an old worker restarting during a rolling deploy)", async () => {
    await t.db.$client.unsafe(OTHER_BODY);
    await t.db.$client`UPDATE installed_functions SET revision = ${FUNCTIONS_REVISION + 1}, sha256 = 'newer'`;

    const result = await applyMigrations(t.url);

    expect(result).toEqual({ functions: "kept", revision: FUNCTIONS_REVISION + 1 });
    expect(await body()).toContain("another release");
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION + 1, sha256: "newer" });
    expect(keptFunctionsWarning(result)).toBe(
      `the database holds db/functions/ revision ${FUNCTIONS_REVISION + 1}, newer than this release's ${FUNCTIONS_REVISION}: left in place ` +
        "(to roll them back to this release's: npm run db:migrate -- --roll-back-functions)",
    );
  });

  it("puts its own bodies over a newer release's when the operator rolls back", async () => {
    await t.db.$client.unsafe(OTHER_BODY);
    await t.db.$client`UPDATE installed_functions SET revision = ${FUNCTIONS_REVISION + 1}, sha256 = 'newer'`;

    expect(await applyMigrations(t.url, { rollBackFunctions: true })).toEqual({ functions: "installed", revision: FUNCTIONS_REVISION });
    expect(await body()).not.toContain("another release");
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION, sha256: FUNCTIONS_SHA256 });
  });

  it.each([
    ["an older release's", FUNCTIONS_REVISION - 1],
    ["the same release's (a body edited by hand)", FUNCTIONS_REVISION],
    ["no record's (a database from before the record)", undefined],
  ])("puts its own bodies over %s and records its revision", async (_, revision) => {
    await t.db.$client.unsafe(OTHER_BODY);
    if (revision === undefined) await t.db.$client`DELETE FROM installed_functions`;
    else await t.db.$client`UPDATE installed_functions SET revision = ${revision}, sha256 = 'other'`;

    const result = await applyMigrations(t.url);

    expect(result).toEqual({ functions: "installed", revision: FUNCTIONS_REVISION });
    expect(keptFunctionsWarning(result)).toBeUndefined();
    expect(await body()).not.toContain("another release");
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION, sha256: FUNCTIONS_SHA256 });
  });

  it("is run by an operator as `npm run db:migrate`, which says what it did and rolls back only when told", async () => {
    const cli = async (...args: string[]) => {
      const run = promisify(execFile)(process.execPath, ["--import", "tsx", path.join(import.meta.dirname, "migrate.ts"), ...args], {
        env: { ...process.env, DATABASE_URL: t.url },
      });
      return run.then(
        ({ stdout }) => ({ code: 0, out: stdout.trim() }),
        (error: { code: number; stderr: string }) => ({ code: error.code, out: error.stderr.trim() }),
      );
    };
    await t.db.$client`UPDATE installed_functions SET revision = ${FUNCTIONS_REVISION + 1}, sha256 = 'newer'`;

    expect(await cli("--roll-back")).toEqual({ code: 1, out: "db:migrate: unknown option --roll-back (only --roll-back-functions)" });
    expect(await cli()).toEqual({ code: 0, out: expect.stringContaining(`revision ${FUNCTIONS_REVISION + 1}, newer than this release's`) });
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION + 1, sha256: "newer" });
    expect(await cli("--roll-back-functions")).toEqual({ code: 0, out: `migrations applied; db/functions/ revision ${FUNCTIONS_REVISION} installed` });
    expect(await held()).toEqual({ revision: FUNCTIONS_REVISION, sha256: FUNCTIONS_SHA256 });
  });
});
