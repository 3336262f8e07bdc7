import { expect } from "vitest";
import type { Database } from "@/db/client";

/**
 * A transaction-level advisory lock held by a session of its own, as a concurrent writer holds it (the key hashed as
 * the SQL functions hash theirs: `hashtextextended(key, 0)`), for a test to prove that a call waits for it.
 */
export async function holdAdvisoryLock(db: Database, key: string) {
  const holder = await db.$client.reserve();
  await holder.unsafe("BEGIN");
  await holder.unsafe("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))", [key]);
  const lock = {
    /** Resolves once a session of this database waits for an advisory lock; throws after 10 s. */
    async waitedFor(what: string): Promise<void> {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const rows = await db.$client.unsafe<{ n: number }[]>(
          "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        );
        if (rows[0]!.n > 0) return;
        if (Date.now() > deadline) throw new Error(`${what} never waited for the lock`);
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
    /** Commits the holder's transaction: the lock is given up. */
    release: async () => void (await holder.unsafe("COMMIT")),
    /** Gives the holder's connection back to the pool, its transaction rolled back if still open. */
    end: async () => {
      await holder.unsafe("ROLLBACK").catch(() => {});
      holder.release();
    },
    /**
     * Proves that `call` (started by the caller) waits for the lock: once it waits, it has not settled; then the lock
     * is given up. Returns the call, to assert on what it comes to.
     */
    async blocks<T>(what: string, call: Promise<T>): Promise<T> {
      let settled = false;
      const tracked = call.finally(() => (settled = true));
      await lock.waitedFor(what);
      expect(settled).toBe(false);
      await lock.release();
      return tracked;
    },
  };
  return lock;
}
