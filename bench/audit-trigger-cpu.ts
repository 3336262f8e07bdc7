import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { embeddedSuperuserUrl, startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { freePort } from "@/test/ports";
import { schedCpuMs } from "./cpu";
import { median } from "./util";

/**
 * The backend CPU of the request audit trigger (db/functions/sponsorship_requests_audit.sql) in the two shapes the
 * service writes requests: a creation (one row inserted, its own transaction) and the worker's batches (one UPDATE
 * of `--batch` rows, pending -> approved, then approved -> relayed, each its own transaction). This tree's
 * triggers against the row trigger of migration 0001 (`--before-sql`, the function as it was, default taken from
 * git at 75eecc8), alternately on one database: the other version's triggers are disabled during each one's turn
 * (docs/performance.md, "Session 6: cuts"). CPU is the backend's time on a CPU, /proc/<pid>/schedstat; the median
 * of the rounds is printed with the ratio.
 *
 *   npx tsx bench/audit-trigger-cpu.ts [--rounds 9] [--batch 100] [--batches 5] [--inserts 300] [--before REV]
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const { values: args } = parseArgs({
  options: {
    rounds: { type: "string", default: "9" },
    batch: { type: "string", default: "100" },
    batches: { type: "string", default: "5" },
    inserts: { type: "string", default: "300" },
    before: { type: "string", default: "75eecc8" },
  },
});
const ROUNDS = Number(args.rounds);
const BATCH = Number(args.batch);
const BATCHES = Number(args.batches);
const INSERTS = Number(args.inserts);

async function main(): Promise<void> {
  // Migration 0001's row trigger function (the tree before issue 15 kept it there).
  const migration = execFileSync("git", ["show", `${args.before}:db/migrations/0001_status-triggers.sql`], { cwd: ROOT, encoding: "utf8" });
  const rowFunction = migration.slice(migration.indexOf("CREATE OR REPLACE FUNCTION sponsorship_requests_audit()"));
  const beforeSql = rowFunction
    .slice(0, rowFunction.indexOf("--> statement-breakpoint"))
    .replace("sponsorship_requests_audit()", "sponsorship_requests_audit_before()");

  const dataDir = await mkdtemp(path.join(tmpdir(), "audit-trigger-cpu-"));
  const port = await freePort();
  const pg = await startEmbeddedPostgres({ dataDir, port });
  try {
    await applyMigrations(pg.url);
    const admin = postgres(embeddedSuperuserUrl(dataDir, port), { max: 1, onnotice: () => {} });
    await admin.unsafe(beforeSql).simple();
    await admin.unsafe(`CREATE TRIGGER audit_before AFTER INSERT OR UPDATE OF status ON sponsorship_requests
      FOR EACH ROW EXECUTE FUNCTION sponsorship_requests_audit_before()`);
    const perRound = BATCH * BATCHES + INSERTS;
    const n = ROUNDS * 2 * perRound;
    await admin.unsafe(`INSERT INTO wallets (wallet_address) SELECT '0x' || lpad(to_hex(i), 40, '0') FROM generate_series(1, ${n}) i`);
    const mine = ["sponsorship_requests_audit_insert", "sponsorship_requests_audit_update"];
    const enableVersion = async (variant: "before" | "after") => {
      const [on, off] = variant === "after" ? [mine, ["audit_before"]] : [["audit_before"], mine];
      await admin.unsafe(`ALTER TABLE sponsorship_requests ${[...on.map((t) => `ENABLE TRIGGER ${t}`), ...off.map((t) => `DISABLE TRIGGER ${t}`)].join(", ")}`);
    };
    await admin.unsafe("ANALYZE");
    let nextWallet = 1;

    const measure = async (variant: "before" | "after") => {
      await enableVersion(variant);
      const c = postgres(pg.url, { max: 1, onnotice: () => {} });
      try {
        const [{ pid }] = (await c`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
        await c`SELECT 1`;
        const insert = (i: number) =>
          c.unsafe(
            `INSERT INTO sponsorship_requests (wallet_id, wallet_address, ip_address, status_actor, status_reason)
             SELECT id, wallet_address, '10.0.0.1', 'api', 'created' FROM wallets WHERE wallet_address = $1 RETURNING id`,
            [`0x${i.toString(16).padStart(40, "0")}`],
            { prepare: true },
          );
        // Creations: one row a transaction.
        const i0 = schedCpuMs(pid);
        for (let k = 0; k < INSERTS; k++) await insert(nextWallet++);
        const insertMs = (schedCpuMs(pid) - i0) / INSERTS;
        // The worker's batches (their rows created first, outside the count).
        const ids: string[] = [];
        for (let k = 0; k < BATCH * BATCHES; k++) ids.push(((await insert(nextWallet++))[0] as unknown as { id: string }).id);
        const u0 = schedCpuMs(pid);
        for (let b = 0; b < BATCHES; b++) {
          const batch = ids.slice(b * BATCH, (b + 1) * BATCH);
          await c.unsafe(
            `UPDATE sponsorship_requests SET status = 'approved', approved_at = now(), status_actor = 'worker', status_reason = 'eligible'
             WHERE id = ANY($1::uuid[]) AND status = 'pending'`,
            [batch],
          );
          await c.unsafe(
            `UPDATE sponsorship_requests SET status = 'relayed', relayed_at = now(), status_actor = 'worker', status_reason = 'signed'
             WHERE id = ANY($1::uuid[]) AND status = 'approved'`,
            [batch],
          );
        }
        return { insertMs, updateMs: (schedCpuMs(pid) - u0) / (BATCH * BATCHES) };
      } finally {
        await c.end();
      }
    };

    const results = { before: { insert: [] as number[], update: [] as number[] }, after: { insert: [] as number[], update: [] as number[] } };
    for (let r = 0; r < ROUNDS; r++) {
      for (const v of r % 2 === 0 ? (["before", "after"] as const) : (["after", "before"] as const)) {
        const m = await measure(v);
        results[v].insert.push(m.insertMs);
        results[v].update.push(m.updateMs);
      }
      process.stdout.write(
        `round ${r + 1}: creation ${results.before.insert.at(-1)!.toFixed(4)} / ${results.after.insert.at(-1)!.toFixed(4)} ms, ` +
          `batched request (2 updates) ${results.before.update.at(-1)!.toFixed(4)} / ${results.after.update.at(-1)!.toFixed(4)} ms (row trigger / this tree)\n`,
      );
    }
    const [events] = await admin<{ n: number }[]>`SELECT count(*)::int AS n FROM request_events`;
    const expected = n + 2 * ROUNDS * 2 * BATCH * BATCHES;
    if (events?.n !== expected) throw new Error(`request_events: ${events?.n} rows, expected ${expected}`);
    await admin.end();
    for (const [what, key] of [
      ["creation (one row inserted)", "insert"],
      ["batched request (2 updates)", "update"],
    ] as const) {
      const b = median(results.before[key]);
      const a = median(results.after[key]);
      process.stdout.write(
        `${what}: backend CPU median of ${ROUNDS} rounds: row trigger ${b.toFixed(4)} ms, this tree ${a.toFixed(4)} ms; ratio ${(a / b).toFixed(3)}\n`,
      );
    }
    process.stdout.write(`audit rows: ${expected}, as expected (one per status each request took)\n`);
  } finally {
    await pg.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`audit-trigger-cpu: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
