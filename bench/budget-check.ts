import postgres from "postgres";

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
