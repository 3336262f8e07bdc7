import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { keptLog } from "@/test/kept-log";
import { createRequest, readRelays, readRequest, setUpPipelineFixture, startInProcessWorker, waitForStatus, type PipelineFixture } from "@/test/worker-fixture";
import { WorkerStuckError } from "./loop";
import type { RunningWorker } from "./worker";

/**
 * A stage failing with an error that is not an outage (a bug, a constraint the code did not expect) is retried with
 * backoff; after WorkerSettings.failuresBeforeExit iterations in a row the loop ends with WorkerStuckError, so the
 * process exits 1 and its supervisor restarts it. Iterations count, not errors: two stages failing in one iteration
 * are one failure of the row (before session 25 each error counted, so two failing stages halved the patience).
 * Here a trigger the code does not expect refuses every update of sponsorship_requests, as a constraint would.
 */

let fx: PipelineFixture;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterAll(async () => {
  for (const w of workers) await w.stop();
  await fx.database.db.execute(sql`DROP TRIGGER IF EXISTS test_refuse ON sponsorship_requests`);
});

/** A trigger refusing updates of sponsorship_requests: to `status` only, or (undefined) every one. */
async function refuseUpdates(status?: string) {
  await fx.database.db.execute(sql`DROP TRIGGER IF EXISTS test_refuse ON sponsorship_requests`);
  await fx.database.db.execute(
    sql.raw(`CREATE OR REPLACE FUNCTION test_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused by the test'; END $$`),
  );
  await fx.database.db.execute(
    sql.raw(
      `CREATE TRIGGER test_refuse BEFORE UPDATE ON sponsorship_requests FOR EACH ROW ${status ? `WHEN (NEW.status = '${status}')` : ""} EXECUTE FUNCTION test_refuse_update()`,
    ),
  );
}

describe("a stage that keeps failing with something other than an outage", () => {
  it("ends the loop after failuresBeforeExit iterations in a row, two stages failing in one counting once, nothing written", async () => {
    // One request approved and held there (its relay refused), one pending: then review and relay both fail in every
    // iteration of the next worker.
    await refuseUpdates("relayed");
    const held = await startInProcessWorker(fx, {}, { failuresBeforeExit: 1_000, maxBackoffMs: 20 });
    workers.push(held);
    const approved = await createRequest(fx);
    await waitForStatus(fx, approved.id, "approved");
    await held.stop();
    await refuseUpdates();
    const pending = await createRequest(fx);

    const { log, lines } = keptLog();
    const worker = await startInProcessWorker(fx, {}, { failuresBeforeExit: 3, maxBackoffMs: 20 }, log);
    workers.push(worker);
    const error = await worker.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WorkerStuckError);
    expect((error as Error).message).toMatch(/^stage (review|relay) failed 3 iterations in a row: .*refused by the test/);
    const failures = lines.filter((l) => l.msg === "worker stage failed, backing off").map((l) => l.fields?.stage);
    // Three iterations, each with both stages failing: six errors (counted per error, the loop would have ended at
    // the second iteration's review).
    expect(failures.filter((s) => s === "review")).toHaveLength(3);
    expect(failures.filter((s) => s === "relay")).toHaveLength(3);
    await worker.stop();

    // Nothing of the refused passes was written; once the cause is gone, a new worker completes both.
    expect((await readRequest(fx, pending.id)).status).toBe("pending");
    expect((await readRequest(fx, approved.id)).status).toBe("approved");
    expect(await readRelays(fx, approved.id)).toEqual([]);
    await fx.database.db.execute(sql`DROP TRIGGER test_refuse ON sponsorship_requests`);
    workers.push(await startInProcessWorker(fx));
    await waitForStatus(fx, pending.id, "completed");
    await waitForStatus(fx, approved.id, "completed");
  });
});
