import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { pipelinedTransaction, type Statement } from "./transaction";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
  await t.db.execute(sql`CREATE TABLE pipelined_probe (n int PRIMARY KEY)`);
});
afterAll(async () => t?.drop());

const insert = (ns: readonly unknown[]): Statement => ({ text: "INSERT INTO pipelined_probe (n) SELECT unnest($1::int[])", params: [ns] });
const count = async () => (await t.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM pipelined_probe`))[0]!.n;

/** Settles within `ms` or fails (a pipelined transaction whose answers went out of step never settles). */
function settlesWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

describe("pipelinedTransaction", () => {
  it("commits nothing of a batch when a statement fails on the server", async () => {
    await t.db.execute(sql`DELETE FROM pipelined_probe`);
    await expect(
      settlesWithin(
        pipelinedTransaction(t.db, (tx) => tx.commit([insert([1]), insert([1]), insert([2])])),
        5_000,
      ),
    ).rejects.toMatchObject({
      code: "23505",
    });
    expect(await count()).toBe(0);
  });

  it("commits nothing and sends nothing when a statement cannot be serialised (postgres.js refuses it before sending)", async () => {
    await t.db.execute(sql`DELETE FROM pipelined_probe`);
    // postgres.js rejects an undefined value on the client: that statement never reaches the server, so the server's
    // transaction is not aborted by it and a COMMIT already pipelined behind it would commit the others (rows 1 and
    // 3); with the statement already prepared on the connection, its answers went out of step and it never settled.
    // Several rounds: the first use of a statement on a connection and the prepared one take different paths.
    for (let round = 0; round < 3; round++) {
      await expect(
        settlesWithin(
          pipelinedTransaction(t.db, (tx) => tx.commit([insert([1]), insert([2, undefined]), insert([3])])),
          5_000,
        ),
      ).rejects.toThrow(/undefined value/);
      expect(await count()).toBe(0);
    }
    // The pool's connections still answer in step.
    const rows = await Promise.all(Array.from({ length: 12 }, (_, i) => t.db.execute<{ i: number }>(sql`SELECT ${i}::int AS i`)));
    expect(rows.map((r) => r[0]!.i)).toEqual(Array.from({ length: 12 }, (_, i) => i));
  });

  // Moved from the two-step transaction's tests when registration became one statement (db/functions/register_wallet.sql).
  it("rolls back what a batch did when the body throws after it; the pool's connections stay usable", async () => {
    await t.db.execute(sql`DELETE FROM pipelined_probe`);
    await expect(
      pipelinedTransaction(t.db, async (tx) => {
        await tx.run([insert([1])]);
        throw new Error("decided to give up");
      }),
    ).rejects.toThrow("decided to give up");
    expect(await count()).toBe(0);
    // Every pooled connection still works (none was left inside an open or aborted transaction).
    await Promise.all(Array.from({ length: 20 }, () => t.db.execute(sql`SELECT 1`)));
    expect(await count()).toBe(0);
  });
});
