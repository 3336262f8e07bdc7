import postgres from "postgres";
import { freePort } from "@/test/ports";
import { standardEndpoints, runEndpoint } from "./http";
import { httpData, rejectOpenRequests } from "./http-data";
import type { BudgetResult } from "./report";
import { settings } from "./settings";
import { healthy, spawnInstance, type Stack } from "./stack";
import { note, waitFor } from "./util";

/**
 * The global budget's cost (issue 10): POST /sponsorship/request on the stack's web server (no budget) and on a
 * second web server of the same stack with a budget set far above what the run creates (every answer still a 201),
 * in interleaved rounds, one instance at a time, workers paused. The budget must not serialise creations, so the
 * two rates should be within noise of each other.
 */
export async function runBudget(stack: Stack, logDir: string): Promise<BudgetResult> {
  const port = await freePort();
  note(`budget: a second web server on ${port} with SPONSOR_BUDGET_PER_HOUR and _PER_DAY set`);
  const web = spawnInstance(stack, "web", { PORT: String(port), SPONSOR_BUDGET_PER_HOUR: "1000000000", SPONSOR_BUDGET_PER_DAY: "1000000000" }, logDir);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor("the budgeted web server", async () => ((await healthy(url)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    stack.pauseWorker();
    // Two chunks of wallets more than the rounds use: both servers are warmed up first (a cold one loses its first
    // round to the JIT, not to the budget; the stack's own server is cold when the HTTP phase did not run).
    const data = await httpData(stack, (settings.rounds * 2 + 2) * Math.max(15_000, settings.seconds * 3000));
    const chunk = Math.floor(data.freshRegisteredWallets.length / (settings.rounds * 2 + 2));
    const post = (round: number, k: number) =>
      standardEndpoints({ ...data, freshRegisteredWallets: data.freshRegisteredWallets.slice((round * 2 + k) * chunk, (round * 2 + k + 1) * chunk) }).find(
        (e) => e.name === "sponsorship-request",
      )!;
    for (const [k, base] of [stack.url, url].entries()) {
      await runEndpoint(base, post(settings.rounds, k), { connections: settings.connections, seconds: settings.seconds, warmupSeconds: 3 });
    }
    const without: number[] = [];
    const withBudget: number[] = [];
    // CPU per created request of the serving web server and PostgreSQL's sessions (workers paused: they are all
    // the round's work), less sensitive than the rate to what else the machine runs.
    const cpuWithout: number[] = [];
    const cpuWith: number[] = [];
    const groups = (pid: () => number[]) => ({ web: pid, postgres: stack.cpu!.postgres! });
    const cpuOf = (r: { cpuMsPerRequest?: Record<string, number> }) => (r.cpuMsPerRequest?.web ?? NaN) + (r.cpuMsPerRequest?.postgres ?? NaN);
    for (let round = 0; round < settings.rounds; round++) {
      // Alternate which goes first, so a drift of the machine's load falls on both alike.
      const order: [string, number[], number[], number, () => number[]][] =
        round % 2 === 0
          ? [
              [stack.url, without, cpuWithout, 0, stack.cpu!.web!],
              [url, withBudget, cpuWith, 1, () => [web.pid]],
            ]
          : [
              [url, withBudget, cpuWith, 1, () => [web.pid]],
              [stack.url, without, cpuWithout, 0, stack.cpu!.web!],
            ];
      for (const [base, into, cpuInto, k, pid] of order) {
        const r = await runEndpoint(base, post(round, k), { connections: settings.connections, seconds: settings.seconds, warmupSeconds: 1, cpu: groups(pid) });
        into.push(r.reqPerSec);
        cpuInto.push(cpuOf(r));
      }
    }
    await rejectOpenRequests(stack.databaseUrl!);
    stack.resumeWorker();
    const checkMicros = await timeBudgetCheck(stack.databaseUrl!);
    note(`budget: the check costs ${checkMicros.check.toFixed(0)} µs in the database with a full day counted (SELECT 1: ${checkMicros.select1.toFixed(0)} µs)`);
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    return {
      checkMicros,
      withoutPerSec: mean(without),
      withPerSec: mean(withBudget),
      ratio: mean(withBudget) / mean(without),
      rounds: { without, with: withBudget },
      cpuMsPerRequest: { without: mean(cpuWithout), with: mean(cpuWith), rounds: { without: cpuWithout, with: cpuWith } },
    };
  } finally {
    await web.stop();
  }
}

/**
 * The budget check alone, inside the database (no round trip, no HTTP: what the machine's other load disturbs
 * least): microseconds per call of sponsorship_budget_refusal once a whole day of minutes has been counted on all 16
 * shards, beside a PL/pgSQL `SELECT` of nothing; interleaved, best of three. The day's rows are two minutes old and
 * more, so the budget phase's rounds (run before) are not changed; they stay, as no later phase sets a budget.
 */
export async function timeBudgetCheck(databaseUrl: string): Promise<{ check: number; select1: number }> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`INSERT INTO sponsorship_budget_counts (shard, minute, created)
      SELECT s, date_trunc('minute', statement_timestamp()) - m * interval '1 minute', 1
      FROM generate_series(0, 15) s, generate_series(2, 1440) m
      ON CONFLICT (shard, minute) DO NOTHING`;
    await sql`ANALYZE sponsorship_budget_counts`;
    const time = async (expression: string) => {
      const results = (await sql
        .unsafe(
          `DO $$ DECLARE s timestamptz := clock_timestamp(); x json; BEGIN
        FOR i IN 1..2000 LOOP SELECT ${expression} INTO x; END LOOP;
        PERFORM set_config('bench.us', (extract(epoch FROM clock_timestamp() - s) * 1e6 / 2000)::text, false); END $$;
        SELECT current_setting('bench.us') AS us`,
        )
        .simple()) as unknown as { us: string }[][];
      return Number(results.at(-1)![0]!.us);
    };
    const best = { check: Infinity, select1: Infinity };
    for (let i = 0; i < 3; i++) {
      best.check = Math.min(best.check, await time("sponsorship_budget_refusal(statement_timestamp(), 1000000000, 1000000000, NULL)"));
      best.select1 = Math.min(best.select1, await time("NULL::json"));
    }
    return best;
  } finally {
    await sql.end();
  }
}
