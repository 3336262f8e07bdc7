import { spawn } from "node:child_process";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/bench/util";
import { closeDatabase, createDatabase } from "@/db/client";
import { pipelinedTransaction } from "@/db/sql/transaction";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { startTcpRelay, type TcpRelay } from "@/test/tcp-relay";

/**
 * The postgres.js driver when the network drops a connection (scripts/patch-postgres.mjs). postgres.js 3.4.9
 * defers small writes to a `setImmediate` that calls `socket.write` after the connection may have closed, and
 * then throws from the immediate: an uncaught TypeError that killed a worker during a database outage in CI
 * (upstream porsager/postgres#1154 and #1208, unreleased fixes). A reserved connection (`pipelinedTransaction`
 * holds one) is the sure way to reach it: the next statement on it after the cut is written to no socket.
 *
 * The driver runs in a child process, so a crash is seen as the child's exit, not as this runner's. A reserved
 * connection whose socket closed must also not come back to the pool as if it were open (every query given to it
 * would fail, or wait for ever in a pool of one).
 */

const ROOT = path.resolve(import.meta.dirname, "..");

const CHILD = `
import postgres from "postgres";
import { createInterface } from "node:readline";
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const sql = postgres(process.env.PG_URL, { max: 1, onnotice: () => {} });
const reserved = await sql.reserve();
await reserved\`SELECT 1\`;
const settle = (p) => Promise.race([
  p.then(() => "ok", (e) => e.code ?? e.message),
  new Promise((r) => setTimeout(() => r("no answer in 5 s"), 5000).unref()),
]);
const during = settle(reserved\`SELECT pg_sleep(60)\`);
process.stdout.write("ready\\n");
const first = await during;
// At once, on the same reserved connection: its socket is gone.
const second = await settle(reserved\`SELECT 1\`);
const third = await settle(reserved\`SELECT 1\`);
process.stdout.write("cut\\n");
await lines.next(); // the parent has restored the network
// Handed back to the pool (of one): the pool must still serve queries.
reserved.release();
const pooled = await settle(sql\`SELECT 1\`);
const reservedAgain = await settle(sql.reserve().then((r) => r\`SELECT 1\`.finally(() => r.release())));
process.stdout.write(JSON.stringify({ first, second, third, pooled, reservedAgain }) + "\\n");
process.exit(0);
`;

let testDb: TestDatabase;
let relay: TcpRelay;

beforeAll(async () => {
  testDb = await createTestDatabase();
  const url = new URL(testDb.url);
  relay = await startTcpRelay({ host: url.hostname, port: Number(url.port) });
});

afterAll(async () => {
  await relay?.close();
  await testDb?.drop();
});

describe("postgres.js on a connection the network drops", () => {
  it("rejects the statements of a reserved connection cut mid-query with CONNECTION_CLOSED; the process lives, and the pool serves again", async () => {
    const url = new URL(testDb.url);
    url.port = String(relay.port);
    const child = spawn(process.execPath, ["--input-type=module", "-e", CHILD], {
      cwd: ROOT,
      env: { ...process.env, PG_URL: url.toString() },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const printed = (line: string) =>
      Promise.race([
        waitFor(`the child to print ${line}`, () => (stdout.includes(`${line}\n`) ? true : undefined), { timeoutMs: 20_000, intervalMs: 20 }),
        exited.then((code) => Promise.reject(new Error(`child exited (${code}) before printing ${line}: ${stderr}`))),
      ]);

    await printed("ready");
    // Once the server runs the statement (pg_sleep), drop the connection under it.
    await waitFor(
      "the server to run pg_sleep",
      async () => {
        const rows = await testDb.db.execute<{ n: number }>(
          sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(60)%' AND state = 'active'`,
        );
        return rows[0]!.n > 0 ? true : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 20 },
    );
    await relay.cut();
    await printed("cut");
    await relay.restore();
    child.stdin.write("restored\n");
    const code = await exited;

    expect(stderr).not.toContain("TypeError");
    expect(code).toBe(0);
    const result = JSON.parse(stdout.split("\n").find((l) => l.startsWith("{")) ?? "{}") as Record<string, string>;
    expect(result).toEqual({ first: "CONNECTION_CLOSED", second: "CONNECTION_CLOSED", third: "CONNECTION_CLOSED", pooled: "ok", reservedAgain: "ok" });
  });

  it("pipelinedTransaction on a connection cut under it: rejected as lost, nothing written after, and the pool (of one) works again", async () => {
    const url = new URL(testDb.url);
    url.port = String(relay.port);
    const db = createDatabase(url.toString(), { max: 1 });
    try {
      const running = pipelinedTransaction(db, (tx) => tx.run([{ text: "SELECT pg_sleep(59)", params: [] }])).then(
        () => "committed",
        (e: { code?: string }) => e.code,
      );
      await waitFor(
        "the server to run pg_sleep",
        async () => {
          const rows = await testDb.db.execute<{ n: number }>(
            sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(59)' AND state = 'active'`,
          );
          return rows[0]!.n > 0 ? true : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 20 },
      );
      await relay.cut();
      expect(await running).toBe("CONNECTION_CLOSED");
      await relay.restore();

      const answer = await pipelinedTransaction(db, (tx) => tx.commit([{ text: "SELECT 41 + 1 AS n", params: [] }]));
      expect(answer).toEqual([[{ n: 42 }]]);
    } finally {
      await closeDatabase(db);
    }
  });
});
