import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import postgres from "postgres";
import { startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { freePort } from "@/test/ports";
import { schedCpuMs } from "./cpu";
import { median } from "./util";

/**
 * The CPU a PostgreSQL backend spends on one creation (create_sponsorship_request, each call its own transaction
 * with its fsync'd commit, as POST /sponsorship/request makes it), this tree's function against another version of
 * it, alternately on one database (docs/performance.md, "Session 6: cuts"): the other version is taken from git
 * (`--before REV`, default HEAD) and installed beside this one as create_sponsorship_request_before. Each round runs
 * `--calls` creations for fresh registered wallets through each version on a connection of its own, in alternating
 * order, and reads that backend's time on a CPU from /proc/<pid>/schedstat; the median of the rounds is printed per version,
 * with their ratio.
 *
 *   npx tsx bench/create-request-cpu.ts [--before REV] [--rounds 7] [--calls 400]
 */

const ROOT = path.resolve(import.meta.dirname, "..");
const { values: args } = parseArgs({
  options: {
    before: { type: "string", default: "HEAD" },
    rounds: { type: "string", default: "7" },
    calls: { type: "string", default: "400" },
  },
});
const ROUNDS = Number(args.rounds);
const CALLS = Number(args.calls);

async function main(): Promise<void> {
  const beforeSource = execFileSync("git", ["show", `${args.before}:db/functions/create_sponsorship_request.sql`], { cwd: ROOT, encoding: "utf8" });
  const dataDir = await mkdtemp(path.join(tmpdir(), "create-request-cpu-"));
  const pg = await startEmbeddedPostgres({ dataDir, port: await freePort() });
  try {
    await applyMigrations(pg.url);
    const setup = postgres(pg.url, { max: 1, onnotice: () => {} });
    await setup.unsafe(beforeSource.replace(/FUNCTION create_sponsorship_request\(/, "FUNCTION create_sponsorship_request_before(")).simple();
    const versions = { before: "create_sponsorship_request_before", after: "create_sponsorship_request" } as const;
    // Fresh registered wallets for every call of every round (a created request makes a wallet's next call a refusal).
    const total = ROUNDS * CALLS * 2 + CALLS * 2;
    const wallets = Array.from({ length: total }, (_, i) => `0x${i.toString(16).padStart(40, "0")}`);
    await setup`INSERT INTO wallets (wallet_address) SELECT unnest(${wallets}::text[])`;
    await setup.unsafe("ANALYZE");
    await setup.end();
    let next = 0;

    const measure = async (fn: string): Promise<number> => {
      const c = postgres(pg.url, { max: 1, onnotice: () => {} });
      try {
        const [{ pid }] = (await c`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
        const call = (i: number) => {
          const now = new Date();
          const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
          return c.unsafe(
            `SELECT ${fn}($1::text, $2::text, $3::cidr, $4::text, $5::timestamptz, $6::int, $7::int, $8::timestamptz, ` +
              "$9::timestamptz, $10::int, $11::text, $12::text, $13::uuid, $14::text, $15::text, $16::int, $17::int, $18::int, $19::timestamptz) AS result",
            [
              ip,
              ip,
              `${ip}/32`,
              wallets[i]!,
              now.toISOString(),
              1000,
              1000,
              new Date(now.getTime() - 3_600_000).toISOString(),
              new Date(now.getTime() - 5000).toISOString(),
              60,
              "ip",
              "wallet",
              randomUUID(),
              "bench",
              null,
              0,
              0,
              16,
              null,
            ],
            { prepare: true },
          );
        };
        // Warm the session (plans are made on a function's first calls) before counting.
        for (let k = 0; k < 10; k++) await call(next++);
        const t0 = schedCpuMs(pid);
        for (let k = 0; k < CALLS - 10; k++) {
          const [row] = (await call(next++)) as unknown as [{ result: { outcome?: string } }];
          if (row.result.outcome !== "created") throw new Error(`${fn}: ${JSON.stringify(row.result)}`);
        }
        return (schedCpuMs(pid) - t0) / (CALLS - 10);
      } finally {
        await c.end();
      }
    };

    const results: Record<keyof typeof versions, number[]> = { before: [], after: [] };
    for (let r = 0; r < ROUNDS; r++) {
      const order: (keyof typeof versions)[] = r % 2 === 0 ? ["before", "after"] : ["after", "before"];
      for (const v of order) results[v].push(await measure(versions[v]));
      process.stdout.write(`round ${r + 1}: before ${results.before.at(-1)!.toFixed(3)} ms, after ${results.after.at(-1)!.toFixed(3)} ms per creation\n`);
    }
    const b = median(results.before);
    const a = median(results.after);
    process.stdout.write(
      `backend CPU per creation (median of ${ROUNDS} rounds of ${CALLS - 10}): ${args.before} ${b.toFixed(3)} ms, this tree ${a.toFixed(3)} ms; ratio ${(a / b).toFixed(3)}\n`,
    );
  } finally {
    await pg.stop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`create-request-cpu: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
