import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { run } from "@/db/sql/run";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { insertNonceFill, type NewNonceFill } from "./nonce-fills";

/** Nonce fills are stored before they are broadcast (worker/stages/confirm/holes.ts); signing is deterministic. */

let t: TestDatabase;

beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const relayer = `0x${"ab".repeat(20)}` as const;

function fill(hash: string): NewNonceFill {
  return {
    relayerAddress: relayer,
    nonce: 7,
    sponsorshipRequestId: null,
    reason: "fill: test",
    transactionHash: hash as `0x${string}`,
    rawTransaction: "0x02f8",
    maxFeePerGas: 3_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
  };
}

describe("insertNonceFill", () => {
  it("answers the stored row for a fill signed again with the same fees (the same hash), instead of failing on it", async () => {
    await t.db.$client`INSERT INTO relayer_accounts (address, chain_id) VALUES (${relayer}, 31337) ON CONFLICT DO NOTHING`;
    const same = fill(`0x${"11".repeat(32)}`);
    const first = await run(t.db, insertNonceFill(same));
    // The first was given up (refused for good); the hole is filled again in the same block, with the same fees.
    await t.db.$client`UPDATE relayer_nonce_fills SET status = 'submitted' WHERE id = ${first}`;
    await t.db.$client`UPDATE relayer_nonce_fills SET status = 'failed' WHERE id = ${first}`;
    expect(await run(t.db, insertNonceFill(same))).toBe(first);
    const other = await run(t.db, insertNonceFill(fill(`0x${"22".repeat(32)}`)));
    expect(other).not.toBe(first);
    const rows = await t.db.$client<{ n: number }[]>`SELECT count(*)::int AS n FROM relayer_nonce_fills WHERE relayer_address = ${relayer}`;
    expect(rows[0]!.n).toBe(2);
  });
});
