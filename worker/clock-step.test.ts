import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { createRequests, setUpPipelineFixture, startInProcessWorker, waitTerminal, type PipelineFixture } from "@/test/worker-fixture";
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

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
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
});
