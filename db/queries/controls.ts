import { and, desc, eq, isNull, sql, type SQL } from "drizzle-orm";
import { ipBlocks, serviceState, type IpBlock, type ServiceState } from "@/db/schema";
import { run, type Executor } from "@/db/sql/run";

/**
 * The operator's controls (decisions.md, "On the open internet"): the pause (service_state, one row) and
 * administrator IP blocks (ip_blocks), and the budget's usage for the dashboard. create_sponsorship_request reads
 * the same rows at creation; the worker reads the pause before it relays.
 */

const NOT_PAUSED: ServiceState = { id: 1, paused: false, pauseReason: null, pausedAt: null, pausedBy: null, updatedAt: new Date(0) };

export async function readServiceState(db: Executor): Promise<ServiceState> {
  const [row] = await db.select().from(serviceState).where(eq(serviceState.id, 1));
  return row ?? NOT_PAUSED;
}

/** Pauses or resumes; `changed` is false when it already was so (the reason of a running pause is kept). */
export async function setPaused(
  tx: Executor,
  input: { paused: boolean; reason: string | null; actor: string; now: Date },
): Promise<{ state: ServiceState; changed: boolean }> {
  const values = input.paused
    ? { paused: true, pauseReason: input.reason, pausedAt: input.now, pausedBy: input.actor, updatedAt: input.now }
    : { paused: false, pauseReason: null, pausedAt: null, pausedBy: null, updatedAt: input.now };
  // The row is locked by the upsert: two administrators acting at once are ordered.
  const [changed] = await tx
    .insert(serviceState)
    .values({ id: 1, ...values })
    .onConflictDoUpdate({ target: serviceState.id, set: values, setWhere: sql`${serviceState.paused} IS DISTINCT FROM ${input.paused}` })
    .returning();
  if (changed) return { state: changed, changed: true };
  return { state: await readServiceState(tx), changed: false };
}

export async function insertIpBlock(tx: Executor, input: { cidr: string; reason: string; actor: string; now: Date }): Promise<IpBlock> {
  const [row] = await tx.insert(ipBlocks).values({ cidr: input.cidr, reason: input.reason, createdBy: input.actor, createdAt: input.now }).returning();
  return row!;
}

/** Lifts an active block; undefined when there is none with this id (unknown, or lifted already). */
export async function liftIpBlock(tx: Executor, input: { id: string; actor: string; now: Date }): Promise<IpBlock | undefined> {
  const [row] = await tx
    .update(ipBlocks)
    .set({ liftedAt: input.now, liftedBy: input.actor })
    .where(and(eq(ipBlocks.id, input.id), isNull(ipBlocks.liftedAt)))
    .returning();
  return row;
}

/** How many administrator IP blocks a list shows at most (the newest). */
export const IP_BLOCKS_SHOWN = 500;

/**
 * The active administrator IP blocks, newest first, at most `limit`; with `overlapping` (a normalised address or
 * prefix) only those that contain it or lie within it, so a block older than the newest `limit` can be found and
 * lifted. `total`: how many match in all.
 */
export async function listActiveIpBlocks(db: Executor, options: { limit?: number; overlapping?: string } = {}): Promise<{ items: IpBlock[]; total: number }> {
  const where = and(isNull(ipBlocks.liftedAt), options.overlapping === undefined ? undefined : sql`${ipBlocks.cidr} && ${options.overlapping}::cidr`);
  const [items, [counted]] = await Promise.all([
    db
      .select()
      .from(ipBlocks)
      .where(where)
      .orderBy(desc(ipBlocks.createdAt))
      .limit(options.limit ?? IP_BLOCKS_SHOWN),
    db
      .select({ total: sql<number>`count(*)::int` })
      .from(ipBlocks)
      .where(where),
  ]);
  return { items, total: counted?.total ?? 0 };
}

/** Requests created in the rolling hour and day, as the budget counts them (db/functions/sponsorship_budget.sql). */
export async function readBudgetUsage(db: Executor): Promise<{ hour: number; day: number }> {
  // The database's clock, as the creation function counts.
  const rows = await run<{ used_hour: string; used_day: string }>(
    db,
    sql`SELECT used_hour::text, used_day::text FROM sponsorship_budget_used(statement_timestamp())`,
  );
  return { hour: Number(rows[0]?.used_hour ?? 0), day: Number(rows[0]?.used_day ?? 0) };
}

/**
 * Budget rows no window can need any more: counts older than a day and an hour, settled windows older than an hour.
 * Counted from the database's clock, which wrote the rows (`now` only for tests): a web server whose clock is ahead
 * deleted counts still inside the day's window, and the day's budget was overspent by them.
 */
export async function pruneBudgetCounts(db: Executor, now?: Date): Promise<number> {
  const at = now ? sql`${now.toISOString()}::timestamptz` : sql`statement_timestamp()`;
  // postgres.js answers a DELETE with its row count beside the (empty) rows.
  const deleted = async (statement: SQL) => ((await run(db, statement)) as unknown as { count: number }).count;
  const counts = await deleted(sql`DELETE FROM sponsorship_budget_counts WHERE minute < ${at} - interval '25 hours'`);
  const windows = await deleted(sql`DELETE FROM sponsorship_budget_windows WHERE minute < ${at} - interval '1 hour'`);
  return counts + windows;
}

/**
 * Whether the budget refuses creation now, and until when: the database's own `sponsorship_budget_refusal`, which
 * create_sponsorship_request asks too, so GET /faucet and the 429 cannot disagree. Null while it has room.
 */
export async function readBudgetExhaustion(
  db: Executor,
  budget: { perHour: number; perDay: number },
): Promise<{ window: "hour" | "day"; retryAtMs: number; retryInMs: number } | null> {
  if (budget.perHour <= 0 && budget.perDay <= 0) return null;
  const rows = await run<{ refusal: { window: "hour" | "day"; retryAtMs: number; retryInMs?: number } | null; nowMs: number }>(
    db,
    sql`
    SELECT sponsorship_budget_refusal(statement_timestamp(), ${budget.perHour}::int, ${budget.perDay}::int, NULL) AS refusal,
      (extract(epoch FROM statement_timestamp()) * 1000)::float8 AS "nowMs"`,
  );
  const row = rows[0];
  const refusal = row?.refusal;
  // The wait counted on the database's clock, which read the window (no other clock is compared); from its own
  // statement time while a function without retryInMs is installed (put back by a release from before db/functions/
  // revisions, db/migrate.ts).
  return refusal ? { window: refusal.window, retryAtMs: refusal.retryAtMs, retryInMs: refusal.retryInMs ?? refusal.retryAtMs - row.nowMs } : null;
}
