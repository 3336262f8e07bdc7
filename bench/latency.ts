import postgres from "postgres";
import { clientsBurst } from "./end-to-end";
import { startStack } from "./stack";
import { note, percentile } from "./util";

/**
 * Where a sponsorship's latency goes (`npx tsx bench/latency.ts`, `TEST_PORT_BASE` for the ports): a stack at
 * 1-s blocks, 300 end-to-end sponsorships to warm up, then `BENCH_REQUESTS` (1,000) with each count of clients in
 * `BENCH_LATENCY_CLIENTS` (`32,8`), each client registering a fresh wallet then requesting it. Printed per run, from
 * the request's own timestamps and its first attempt's: p50/p90 of request -> completed, and of its stages: review
 * (requested -> approved), queue (approved -> relayed), relayed -> submitted (stored, then broadcast) and
 * submitted -> completed (the wait for a block, the poll that sees it, the receipts and the settling commit), and
 * that last one split again by the probe's own watch of the chain's head (a 5-ms poll of `eth_blockNumber`, so each
 * block's time is known to about 5 ms): submitted -> the block that holds it, then that block -> completed.
 */
const clientCounts = (process.env.BENCH_LATENCY_CLIENTS ?? "32,8").split(",").map(Number);
const requests = Number(process.env.BENCH_REQUESTS ?? 1000);

const stack = await startStack({ name: "latency", blockTime: 1, logDir: process.env.BENCH_LOG_DIR ?? "/tmp" });
const sql = postgres(stack.databaseUrl!, { max: 2, onnotice: () => {} });
/** When each block was first seen by this probe (a 5-ms poll of the chain's head): the block's own time to ~5 ms. */
const blockSeen = new Map<number, number>();
let watching = true;
const watcher = (async () => {
  while (watching) {
    try {
      const res = await fetch(stack.rpcUrl!, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}',
      });
      const block = Number(((await res.json()) as { result: string }).result);
      if (!blockSeen.has(block)) blockSeen.set(block, Date.now());
    } catch {
      // the chain is busy or restarting: the next poll
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
})();
try {
  await clientsBurst(stack.url, sql, 300, 32);
  for (const clients of clientCounts) {
    const ids = await clientsBurst(stack.url, sql, requests, clients);
    const rows = await sql<
      { requested: Date; approved: Date; relayed: Date; completed: Date; submitted: Date | null; block: string | null; attempts: number }[]
    >`
      SELECT r.requested_at AS requested, r.approved_at AS approved, r.relayed_at AS relayed, r.completed_at AS completed,
             (SELECT min(t.submitted_at) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id) AS submitted,
             (SELECT max(t.block_number) FROM relay_transactions t WHERE t.sponsorship_request_id = r.id AND t.status = 'confirmed') AS block,
             (SELECT count(*)::int FROM relay_transactions t WHERE t.sponsorship_request_id = r.id) AS attempts
      FROM sponsorship_requests r WHERE r.id = ANY(${ids}::uuid[]) AND r.status = 'completed'`;
    // One attempt only: a replaced request's block wait would include its replacement.
    const mined = rows.filter((r) => r.attempts === 1 && r.submitted && r.block && blockSeen.has(Number(r.block)));
    const q = (xs: number[]) => [50, 90].map((v) => Math.round(percentile(xs, v))).join(" / ");
    const p = (f: (r: (typeof rows)[number]) => number) => q(rows.map(f));
    note(
      `${clients} clients, ${rows.length} completed; p50 / p90 ms: request -> completed ${p((r) => +r.completed - +r.requested)}; ` +
        `review ${p((r) => +r.approved - +r.requested)}, queue ${p((r) => +r.relayed - +r.approved)}, ` +
        `relayed -> submitted ${p((r) => (r.submitted ? +r.submitted - +r.relayed : 0))}, submitted -> completed ${p((r) => +r.completed - +(r.submitted ?? r.relayed))}`,
    );
    note(
      `  of which (${mined.length} with one attempt and their block seen, each block's time to >= 5 ms): submitted -> block ${q(mined.map((r) => blockSeen.get(Number(r.block))! - +r.submitted!))}, ` +
        `block -> completed ${q(mined.map((r) => +r.completed - blockSeen.get(Number(r.block))!))}`,
    );
  }
} finally {
  watching = false;
  await watcher;
  await sql.end({ timeout: 5 });
  await stack.stop();
}
