import { and, desc, eq, gt, isNull, or, sql } from "drizzle-orm";
import { blocks, type Block, type BlockSubject, type NewBlock } from "@/db/schema";
import type { Executor } from "@/db/sql/run";

/** A block is active while it is not lifted and not expired (administrator blocks have no expiry). */
function activeAt(subjectType: BlockSubject, subject: string, now: Date) {
  return and(
    eq(blocks.subjectType, subjectType),
    eq(blocks.subject, subject),
    isNull(blocks.liftedAt),
    or(isNull(blocks.expiresAt), gt(blocks.expiresAt, now)),
  );
}

export async function insertBlock(db: Executor, values: NewBlock): Promise<Block> {
  const [row] = await db.insert(blocks).values(values).returning();
  return row!;
}

export async function findActiveBlocks(db: Executor, subjectType: BlockSubject, subject: string, now: Date): Promise<Block[]> {
  return db
    .select()
    .from(blocks)
    .where(activeAt(subjectType, subject, now))
    .orderBy(desc(blocks.createdAt));
}

export async function hasActiveBlock(db: Executor, subjectType: BlockSubject, subject: string, now: Date): Promise<boolean> {
  const rows = await db
    .select({ one: sql<number>`1` })
    .from(blocks)
    .where(activeAt(subjectType, subject, now))
    .limit(1);
  return rows.length > 0;
}

/** Lifts every active block of the subject; returns the lifted rows. */
export async function liftActiveBlocks(
  db: Executor,
  subjectType: BlockSubject,
  subject: string,
  lift: { liftedBy: string; liftReason: string; now: Date },
): Promise<Block[]> {
  return db
    .update(blocks)
    .set({ liftedAt: lift.now, liftedBy: lift.liftedBy, liftReason: lift.liftReason })
    .where(activeAt(subjectType, subject, lift.now))
    .returning();
}

/** Every block the subject ever had, newest first. */
export async function listBlocksOf(db: Executor, subjectType: BlockSubject, subject: string): Promise<Block[]> {
  return db
    .select()
    .from(blocks)
    .where(and(eq(blocks.subjectType, subjectType), eq(blocks.subject, subject)))
    .orderBy(desc(blocks.createdAt), desc(blocks.id));
}
