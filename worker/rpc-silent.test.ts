import { sql } from "drizzle-orm";
import { afterEach, describe, expect, it } from "vitest";
import { keptLog } from "@/test/kept-log";
import { startSilentRpcProxy, type SilentRpcProxy } from "@/test/rpc-proxy";
import { COOL_OFF_MS } from "@/lib/chain/endpoint-breaker";
import { CHAIN_WAIT_IN_TRANSACTION_MS } from "./chain";
import type { RunningWorker } from "./worker";
import {
  readHeartbeat,
  createRequest,
  readRelays,
  readRequest,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * decisions.md "Operators are told", several RPC endpoints: reads fail over to the next when one does not answer.
 * Here endpoints accept connections and requests and never answer (test/rpc-proxy.ts `startSilentRpcProxy`) ahead of
 * the real anvil. Each read used to wait the 5-s timeout on each of them before asking the next: the worker took 15 s
 * to start with one, and with two a request stayed approved for over a minute while the relay stage's transaction,
 * its rows locked, was ended by the server (idle_in_transaction_session_timeout, 15 s) and logged as a database outage.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let proxies: SilentRpcProxy[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await Promise.all(proxies.map((p) => p.close()));
  proxies = [];
});

async function silentEndpoints(n: number, when: boolean | RegExp = true): Promise<SilentRpcProxy[]> {
  const started = await Promise.all(Array.from({ length: n }, () => startSilentRpcProxy(fx.anvil.rpcUrl, when)));
  proxies.push(...started);
  return started;
}

/** The longest a worker session has been idle inside a transaction right now (what the server's timeout measures). */
async function longestIdleInTransactionMs(): Promise<number> {
  const [row] = await fx.database.db.execute<{ ms: number }>(
    sql`SELECT coalesce(max(extract(epoch FROM clock_timestamp() - state_change) * 1000), 0)::float8 AS ms
          FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'sponsorship-worker' AND state = 'idle in transaction'`,
  );
  return row?.ms ?? 0;
}

const databaseOutages = (lines: ReturnType<typeof keptLog>["lines"]) => lines.filter((l) => l.msg.startsWith("database unavailable"));

describe("RPC endpoints that accept connections and never answer", () => {
  it("ahead of a good one cost the worker no read's timeout: it starts, a request completes at once, and one that answers again is re-probed and used", async () => {
    const silent = await silentEndpoints(2);
    const { log, lines } = keptLog();
    const startedAt = performance.now();
    worker = await startInProcessWorker(fx, { RPC_URL: [...silent.map((s) => s.url), fx.anvil.rpcUrl].join(",") }, {}, log);
    // Start-up asks every endpoint for the chain id at once; those silent a second after the first answer are left
    // aside by the reads that follow (it took 15 s with one silent endpoint, 30 s with two).
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 60_000);
    // Counted, not timed (a loaded machine takes seconds either way): start-up asked each silent endpoint for the chain
    // id, and review, relay (its broadcast goes to every endpoint with its chain id, and waits for the good endpoint's acceptance only)
    // and confirm read nothing from them while they cooled off: a read that waited on one would have asked it. The
    // cool-off began after startedAt, so until COOL_OFF_MS past it no maintenance check re-probes them either.
    for (const s of silent) {
      const beforeReprobe = s.calls().filter((c) => c.at < startedAt + COOL_OFF_MS);
      expect(beforeReprobe.filter((c) => c.method !== "eth_chainId" && c.method !== "eth_sendRawTransaction")).toEqual([]);
      // Start-up's chain id; any other came with a broadcast, in its HTTP request (the same `at`).
      const sentAt = new Set(beforeReprobe.filter((c) => c.method === "eth_sendRawTransaction").map((c) => c.at));
      expect(beforeReprobe.filter((c) => c.method === "eth_chainId" && !sentAt.has(c.at))).toHaveLength(1);
    }
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(databaseOutages(lines)).toEqual([]);

    // Each endpoint's state, as the heartbeat shows it: the silent ones cooling off, the good one asked.
    const details = await waitFor("a heartbeat with the silent endpoints cooling off", async () => {
      const d = await readHeartbeat(fx, worker!.workerId);
      return d?.chain.endpoints.every((e, i) => i < 2 === (e.coolingOffUntil !== null)) ? d : undefined;
    });
    expect(details.chain.endpoints.map((e) => [e.reachable, e.behind])).toEqual([
      [false, false],
      [false, false],
      [true, false],
    ]);
    expect(lines.filter((l) => l.msg.startsWith("RPC endpoint not answering")).map((l) => l.fields?.endpoint)).toEqual([1, 2]);

    // The first answers again: once its cool-off has ended, a maintenance check asks it, and reads use it again.
    silent[0]!.silence(false);
    await waitFor("the first endpoint to be re-probed", async () => worker!.ctx.chain.endpoints[0]!.reachable, 90_000, 250);
    expect(lines.some((l) => l.msg === "RPC endpoint answers again" && l.fields?.endpoint === 1)).toBe(true);
    const asked = silent[0]!.requests();
    const next = await createRequest(fx);
    await waitFor("the next request to complete", async () => (await readRequest(fx, next.id)).status === "completed", 30_000);
    expect(silent[0]!.requests()).toBeGreaterThan(asked);
    expect(worker.ctx.chain.endpoints[1]!.reachable).toBe(false);
    expect(databaseOutages(lines)).toEqual([]);
  }, 150_000);

  it("falling silent while the relay stage reads the chain, its rows locked: the transaction is rolled back within the bound as a chain outage, and the request completes", async () => {
    // Each falls silent at the first request carrying the relay stage's fee read (eth_maxPriorityFeePerGas is in its
    // batch only): the first at once, the second when that batch fails over to it 5 s later.
    const falling = await silentEndpoints(2, /eth_maxPriorityFeePerGas/);
    const { log, lines } = keptLog();
    worker = await startInProcessWorker(fx, { RPC_URL: [...falling.map((s) => s.url), fx.anvil.rpcUrl].join(",") }, {}, log);

    const { id } = await createRequest(fx);
    let longestIdle = 0;
    await waitFor(
      "the request to complete",
      async () => {
        longestIdle = Math.max(longestIdle, await longestIdleInTransactionMs());
        return (await readRequest(fx, id)).status === "completed";
      },
      60_000,
    );
    expect(falling.every((f) => f.silent())).toBe(true);
    // The relay's transaction waited on the chain for CHAIN_WAIT_IN_TRANSACTION_MS at most (it waited 10 s, 5 s per
    // silent endpoint; with three the server ended it at 15 s).
    expect(longestIdle).toBeLessThan(CHAIN_WAIT_IN_TRANSACTION_MS + 1_500);
    const relayOutage = lines.find((l) => l.msg === "chain unavailable, backing off" && l.fields?.stage === "relay");
    expect(String(relayOutage?.fields?.error)).toContain(`no answer from the chain within ${CHAIN_WAIT_IN_TRANSACTION_MS} ms`);
    expect(databaseOutages(lines)).toEqual([]);
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
  }, 120_000);
});
