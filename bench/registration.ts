import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { closeDatabase, createDatabase, type Database } from "@/db/client";
import { startEmbeddedPostgres } from "@/db/embedded";
import { applyMigrations } from "@/db/migrate";
import { lockKeysSql } from "@/db/sql/advisory-locks";
import { pipelinedTransaction } from "@/db/sql/transaction";
import { blockActive, isoUtc, ts } from "@/db/sql/fragments";
import { parseConfig } from "@/lib/config";
import { clientIdentity, clientNetwork } from "@/lib/sponsorship/client-identity";
import { registerIpLockKey } from "@/lib/sponsorship/lock-keys";
import { rateWindowStart } from "@/lib/sponsorship/rate-limits";
import { registerWallet } from "@/lib/sponsorship/wallets";
import { freePort } from "@/test/ports";
import { cpuBetween, snapshotCpu, stackCpuGroups } from "./cpu";
import { ipFor, mapConcurrent, median, randomAddress, type Address } from "./util";

/**
 * `TEST_PORT_BASE=<yours> npx tsx bench/registration.ts`: the registration's database work alone (issue 15, "the
 * registration's upsert"), as the web server does it (lib/sponsorship/wallets.ts, the pool of 10), against one
 * embedded PostgreSQL: the two-round-trip transaction it replaced (BEGIN + the identity's lock + the count and the
 * IP-block check; then the hit + the upsert + COMMIT, as it was written, below) and `register_wallet` (one
 * statement), in interleaved rounds (ABBA, so the tables' growth and the machine's drift fall on both alike).
 * Each round registers REGISTRATIONS fresh wallets, 32 at a time, from 256 client addresses (none near the limit).
 * Reported per registration: this process's CPU (the web server's share of the work: the driver, the runner),
 * PostgreSQL's sessions' and its own processes' CPU, and registrations per second; medians of the rounds.
 * docs/performance.md, "Session 6: cuts (issue 15)".
 */

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const REGISTRATIONS = Number(process.env.REGISTRATIONS ?? 3000);
const CONCURRENCY = 32;

const config = parseConfig({ DATA_DIR: "/nonexistent/bench-registration", LOG_LEVEL: "silent", REGISTER_LIMIT_IP_PER_HOUR: "1000000000" });

/** The registration before issue 15, as db/queries/wallets.ts wrote it (attemptRegistration on twoStepTransaction). */
async function twoRoundTrips(db: Database, walletAddress: Address, ip: string): Promise<boolean> {
  const now = new Date();
  const key = clientIdentity(ip, config.ipv6PrefixLength);
  const network = clientNetwork(ip, config.ipv6PrefixLength);
  return pipelinedTransaction(db, async (tx) => {
    const [, countRows] = await tx.run([
      lockKeysSql([registerIpLockKey(key)]),
      sql`SELECT (
          SELECT (extract(epoch FROM h.created_at) * 1000)::float8 FROM rate_limit_hits h
          WHERE h.scope = ${"register_ip"} AND h.key = ${key} AND h.created_at > ${ts(rateWindowStart(now))}
          ORDER BY h.created_at DESC OFFSET ${Math.max(0, config.registerLimitIpPerHour - 1)} LIMIT 1
        ) AS at, client_ip_blocked(${network}::cidr) AS "ipBlocked"`,
    ]);
    const { at, ipBlocked } = countRows![0] as { at: number | null; ipBlocked: boolean };
    if (ipBlocked || at !== null) {
      await tx.commit();
      return false;
    }
    const [, upserted] = await tx.commit([
      sql`INSERT INTO rate_limit_hits (scope, key, created_at) VALUES ${sql.join([sql`(${"register_ip"}, ${key}, ${ts(now)})`], sql`, `)}`,
      sql`
        WITH w AS (
          INSERT INTO wallets (wallet_address, first_seen_at, last_seen_at)
          VALUES (${walletAddress}, ${ts(now)}, ${ts(now)})
          ON CONFLICT (wallet_address) DO UPDATE SET last_seen_at = GREATEST(wallets.last_seen_at, EXCLUDED.last_seen_at)
          RETURNING *, (xmax = 0) AS created
        )
        SELECT w.id, w.wallet_address AS "walletAddress", ${isoUtc(sql`w.first_seen_at`)} AS "firstSeenAt",
          ${isoUtc(sql`w.last_seen_at`)} AS "lastSeenAt", w.sponsorship_count AS "sponsorshipCount",
          EXISTS (SELECT 1 FROM blocks b WHERE b.subject_type = 'wallet' AND b.subject = w.wallet_address AND ${blockActive("b", now)}) AS "isBlocked",
          w.created FROM w`,
    ]);
    return (upserted![0] as { created: boolean }).created;
  });
}

async function oneStatement(db: Database, walletAddress: Address, ip: string): Promise<boolean> {
  return (await registerWallet(db, { walletAddress, ip }, { config })).created;
}

const variants = { "two round trips (before)": twoRoundTrips, "register_wallet (after)": oneStatement } as const;
type Variant = keyof typeof variants;
type Round = { cpuNode: number; cpuSessions: number; cpuServer: number; perSec: number };

async function main(): Promise<void> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "bench-registration-"));
  const pg = await startEmbeddedPostgres({ dataDir, port: await freePort() });
  const db = createDatabase(pg.url, { max: 10, applicationName: "bench-registration" });
  try {
    await applyMigrations(pg.url);
    const groups = stackCpuGroups(dataDir, () => ({}));
    const cpuGroups = { postgres: groups.postgres!, server: groups["postgres (server)"]! };
    const round = async (name: Variant): Promise<Round> => {
      const wallets = Array.from({ length: REGISTRATIONS }, () => randomAddress());
      const node0 = process.cpuUsage();
      const pg0 = snapshotCpu(cpuGroups);
      const t0 = performance.now();
      const created = await mapConcurrent(wallets, CONCURRENCY, (w, i) => variants[name](db, w, ipFor(i % 256)));
      const seconds = (performance.now() - t0) / 1000;
      const pgUsed = cpuBetween(pg0, cpuGroups);
      const node = process.cpuUsage(node0);
      if (created.some((c) => !c)) throw new Error(`${name}: a registration of a fresh wallet was not created`);
      return {
        cpuNode: (node.user + node.system) / 1000 / REGISTRATIONS,
        cpuSessions: pgUsed.postgres! / REGISTRATIONS,
        cpuServer: pgUsed.server! / REGISTRATIONS,
        perSec: REGISTRATIONS / seconds,
      };
    };
    const names = Object.keys(variants) as Variant[];
    // A warm-up round of each (JIT, prepared statements on every connection of the pool).
    for (const name of names) await round(name);
    const rounds: Record<Variant, Round[]> = { "two round trips (before)": [], "register_wallet (after)": [] };
    for (let r = 0; r < ROUNDS; r++) {
      const order = r % 4 === 0 || r % 4 === 3 ? names : [...names].reverse();
      for (const name of order) rounds[name].push(await round(name));
    }
    const f = (xs: number[], digits: number) => `${median(xs).toFixed(digits)} (${xs.map((x) => x.toFixed(digits)).join(", ")})`;
    process.stdout.write(`${REGISTRATIONS} registrations a round, ${CONCURRENCY} at a time, pool of 10, ${ROUNDS} rounds each (medians, rounds in brackets)\n`);
    for (const name of names) {
      const rs = rounds[name];
      process.stdout.write(
        `${name}:\n` +
          `  registrations/s ${f(
            rs.map((x) => x.perSec),
            0,
          )}\n` +
          `  CPU ms per registration: this process ${f(
            rs.map((x) => x.cpuNode),
            3,
          )}\n` +
          `                           PostgreSQL sessions ${f(
            rs.map((x) => x.cpuSessions),
            3,
          )}\n` +
          `                           PostgreSQL server processes ${f(
            rs.map((x) => x.cpuServer),
            3,
          )}\n`,
      );
    }
    const [before, after] = names.map((n) => rounds[n]);
    const ratio = (pick: (x: Round) => number) => {
      const was = median(before!.map(pick));
      return was > 0 ? (median(after!.map(pick)) / was).toFixed(2) : "n/a (under a tick)";
    };
    process.stdout.write(
      `after / before: registrations/s ${ratio((x) => x.perSec)}, CPU this process ${ratio((x) => x.cpuNode)}, ` +
        `PostgreSQL sessions ${ratio((x) => x.cpuSessions)}, server ${ratio((x) => x.cpuServer)}, ` +
        `sum ${ratio((x) => x.cpuNode + x.cpuSessions + x.cpuServer)}\n`,
    );
  } finally {
    await closeDatabase(db);
    await pg.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench/registration: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
