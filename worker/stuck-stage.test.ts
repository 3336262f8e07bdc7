import { sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { keptLog } from "@/test/kept-log";
import { startRpcProxy } from "@/test/rpc-proxy";
import { startTcpRelay, type TcpRelay } from "@/test/tcp-relay";
import { createRequests, setUpPipelineFixture, startInProcessWorker, waitFor, waitTerminal, type PipelineFixture } from "@/test/worker-fixture";
import { StageDeadlineError } from "./loop";
import type { RunningWorker } from "./worker";

/**
 * A database that never answers: the worker reaches PostgreSQL through a TCP relay that, once told to, drops every
 * packet without closing anything, as a partition or a frozen peer does. By default the worker's pool gives such a
 * statement up after 60 s (databaseAnswerTimeoutMs: an outage, retried, the same process goes on once the network is
 * back). Whatever still waits with no answer at all (worker/loop.ts STAGE_DEADLINE_MS, 5 min; here set below the
 * answer timeout to reach it) ends the loop with StageDeadlineError (the process deletes its heartbeat row, exits 1 and
 * is restarted) without giving its lease back, and a worker started afresh takes the relayer over once the lease
 * expired.
 */

let fx: PipelineFixture;
let relay: TcpRelay;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  const url = new URL(fx.database.url);
  relay = await startTcpRelay({ host: url.hostname, port: Number(url.port) });
});

// Each test alone with its workers: the one relayer is leased by one of them.
afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
});

afterAll(async () => {
  await relay?.close();
});

describe("a stage waiting on a database that never answers", () => {
  it("ends the loop with StageDeadlineError; a worker started afresh completes the requests that waited", async () => {
    const url = new URL(fx.database.url);
    url.port = String(relay.port);
    // What the worker logs, kept.
    const { log: keep, lines: said } = keptLog();
    const stuck = await startInProcessWorker(fx, { DATABASE_URL: url.toString() }, { heartbeatMs: 200, leaseTtlMs: 2_000, stageDeadlineMs: 5_000 }, keep);
    workers.push(stuck);
    const outcome = stuck.done.then(
      () => "ended without an error",
      (error: unknown) => error,
    );
    const before = await createRequests(fx, 2);
    expect(
      await waitTerminal(
        fx,
        before.map((r) => r.id),
        30_000,
      ),
    ).toEqual({ completed: 2 });

    relay.blackhole();
    const saidBefore = said.length;
    const waiting = await createRequests(fx, 3);
    const error = await outcome;
    expect(error).toBeInstanceOf(StageDeadlineError);
    expect((error as Error).message).toMatch(/^stage (leases|review|relay|confirm|index): no answer from the database or the chain for 5 s/);
    // A fifth of the way, the worker said which stage waited (the heartbeat alone showed nothing).
    const stage = /^stage (\w+):/.exec((error as Error).message)![1];
    // Once, though the watchdog looked again every 500 ms.
    const warned = said.slice(saidBefore).filter((l) => l.msg === "worker stage waiting: no answer from the database or the chain");
    expect(warned.map((l) => l.fields?.stage)).toEqual([stage]);

    // What the supervisor does: the stuck process exits (worker/index.ts: stop(), then exit 1), a new one starts,
    // takes the relayer over once the old lease expired, and completes what waited. Here the stuck stage's connection
    // is dropped and new ones reach the database again, as when one connection lost a statement.
    await relay.cut();
    await relay.restore();
    await stuck.stop();
    // Stopped with a stage in flight, it did not give its lease back (the stage may have held the relayer's row).
    const leases = await fx.database.db.execute<{ owner: string | null }>(sql`SELECT lease_owner AS owner FROM relayer_accounts`);
    expect(leases.map((l) => l.owner)).toEqual([stuck.workerId]);
    // Its heartbeat row is gone: the dashboard shows no dead worker. Before, the pool was closed first and the row
    // could not be deleted (it stayed until a worker started an hour later).
    const beats = await fx.database.db.execute<{ id: string }>(sql`SELECT worker_id AS id FROM worker_heartbeats WHERE worker_id = ${stuck.workerId}`);
    expect(beats).toHaveLength(0);
    const fresh = await startInProcessWorker(fx, {}, { heartbeatMs: 200 });
    workers.push(fresh);
    expect(
      await waitTerminal(
        fx,
        waiting.map((r) => r.id),
        60_000,
      ),
    ).toEqual({ completed: 3 });
  }, 120_000);

  it("fails a stage whose database has said nothing for databaseAnswerTimeoutMs, as an outage, and goes on by itself once the network is back", async () => {
    await relay.cut();
    await relay.restore();
    const url = new URL(fx.database.url);
    url.port = String(relay.port);
    const { log: keep, lines: said } = keptLog();
    const settings = { heartbeatMs: 200, leaseTtlMs: 2_000, stageDeadlineMs: 60_000, databaseAnswerTimeoutMs: 1_500 };
    const worker = await startInProcessWorker(fx, { DATABASE_URL: url.toString() }, settings, keep);
    workers.push(worker);
    let ended: unknown;
    void worker.done.then(
      () => (ended = "ended"),
      (error: unknown) => (ended = error),
    );
    const before = (await createRequests(fx, 2)).map((r) => r.id);
    expect(await waitTerminal(fx, before, 30_000)).toEqual({ completed: 2 });

    relay.blackhole();
    const saidBefore = said.length;
    const waiting = (await createRequests(fx, 3)).map((r) => r.id);
    // Before the answer timeout the stage waited on its statement until the deadline ended the worker (60 s here,
    // 5 min by default). Now it is given up after 1.5 s (ANSWER_TIMEOUT); a retry that needs a new connection meets
    // the connect timeout instead (30 s): either way an outage, backed off and retried.
    await waitFor(
      "a stage given up on the silent database",
      async () => said.slice(saidBefore).some((l) => l.msg === "database unavailable, backing off") || undefined,
      45_000,
    );
    await relay.cut();
    await relay.restore();
    // The same worker (the only one), never stuck, completes what waited.
    expect(await waitTerminal(fx, waiting, 60_000)).toEqual({ completed: 3 });
    expect(ended).toBeUndefined();
    // Logged at the end of the first clean pass, which may be the one whose confirm stage completed the requests:
    // the database can show them completed a moment before the line is written (seen once in CI under load).
    await waitFor("the worker to log its recovery", async () => said.slice(saidBefore).some((l) => l.msg === "worker recovered") || undefined, 10_000);
  }, 150_000);

  it("lets a stage run longer than the deadline while its calls are answered (a slow node is not a stuck stage)", async () => {
    // Every JSON-RPC request answered after 1 s: a stage makes several in a row (the head, the treasury and the fees,
    // the dry runs, the broadcast), so it lasts well over the 2.5-s deadline, with an answer at least every second.
    const slowNode = await startRpcProxy(fx.anvil.rpcUrl, async () => {
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      return undefined;
    });
    try {
      const slow = await startInProcessWorker(fx, { RPC_URL: slowNode.url }, { heartbeatMs: 200, stageDeadlineMs: 2_500 });
      workers.push(slow);
      let ended: unknown;
      void slow.done.then(
        () => (ended = "ended"),
        (error: unknown) => (ended = error),
      );
      const requests = await createRequests(fx, 3);
      expect(
        await waitTerminal(
          fx,
          requests.map((r) => r.id),
          90_000,
        ),
      ).toEqual({ completed: 3 });
      expect(ended).toBeUndefined();
      await slow.stop();
    } finally {
      await slowNode.close();
    }
  }, 120_000);
});
