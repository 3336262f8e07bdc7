import { afterEach, describe, expect, it, vi } from "vitest";
import {
  anvilRpc,
  createRequest,
  createRequests,
  readRelays,
  setUpPipelineFixture,
  startInProcessWorker,
  waitFor,
  waitTerminal,
  type PipelineFixture,
} from "@/test/worker-fixture";
import type { RunningWorker } from "./worker";

/**
 * The wall clock steps back (NTP correcting a clock that ran fast, a VM restored from a snapshot, an operator's
 * `date -s`). The loop spaces its passes on a monotonic clock, so it goes on as before. On the wall clock, every
 * "time since the last pass" came out negative: the queue stages did not run even when a new request woke the loop,
 * and it slept until the wall clock caught up (here an hour), with requests left pending.
 *
 * The step is real for everything in this process that reads `Date` (vitest's fake Date, moving on with real time);
 * timers and `performance.now()` are untouched, as a real step leaves them.
 */

let fx: PipelineFixture;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  vi.useRealTimers();
  for (const w of workers.splice(0)) await w.stop();
});

describe("the worker when the wall clock steps back", () => {
  it("goes on reviewing, relaying and confirming: new requests complete", async () => {
    const worker = await startInProcessWorker(fx);
    workers.push(worker);
    const before = (await createRequests(fx, 2)).map((r) => r.id);
    expect(await waitTerminal(fx, before, 30_000)).toEqual({ completed: 2 });

    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    const after = (await createRequests(fx, 3)).map((r) => r.id);
    expect(await waitTerminal(fx, after, 30_000)).toEqual({ completed: 3 });
  }, 90_000);

  it("judges a wallet's automatic block by the database's clock: one expired there does not reject the request", async () => {
    const { id, wallet } = await createRequest(fx);
    // Expired a minute ago, by the database's clock: an hour ahead of this worker's.
    await fx.database.db.$client`INSERT INTO blocks (subject_type, subject, kind, reason, created_by, created_at, expires_at)
      VALUES ('wallet', ${wallet.toLowerCase()}, 'automatic', 'test: expired', 'rate_limiter', now() - interval '16 minutes', now() - interval '1 minute')`;
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    const worker = await startInProcessWorker(fx);
    workers.push(worker);
    // Before, the claim compared the block with the worker's Date: still active there, so rejected wallet_blocked.
    expect(await waitTerminal(fx, [id], 30_000)).toEqual({ completed: 1 });
  }, 60_000);

  it("still replaces a transaction left unmined for RELAY_TIMEOUT_MS (the confirm stage's clocks too)", async () => {
    await anvilRpc(fx, "evm_setAutomine", [false]);
    try {
      const worker = await startInProcessWorker(fx, { RELAY_TIMEOUT_MS: "1500" });
      workers.push(worker);
      const { id } = await createRequest(fx);
      await waitFor("attempt 1 submitted", async () => (await readRelays(fx, id)).find((r) => r.status === "submitted"), 20_000);
      vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
      // On the wall clock the chain had been reachable for minus an hour: nothing was stuck, nothing replaced.
      const relays = await waitFor("a replacement (attempt 2) submitted", async () => {
        const all = await readRelays(fx, id);
        return all.length === 2 && all[1]!.status === "submitted" ? all : undefined;
      });
      expect(relays[1]!.nonce).toBe(relays[0]!.nonce);
      await anvilRpc(fx, "evm_mine");
      expect(await waitTerminal(fx, [id], 30_000)).toEqual({ completed: 1 });
    } finally {
      await anvilRpc(fx, "evm_setAutomine", [true]);
    }
  }, 90_000);
});
