import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { checkHealth } from "@/lib/health";
import { FeeCeilingWatch, type FeeCeilingChange } from "./fee-ceiling";
import { getWorkerMetrics } from "@/lib/metrics";
import { healthResponse } from "@/lib/sponsorship/schemas";
import type { RunningWorker } from "./worker";
import {
  anvilRpc,
  createRequest,
  readRelays,
  readRequest,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * decisions.md "Operators are told", fee ceiling: a relay is never signed with a maxFeePerGas above
 * MAX_FEE_PER_GAS_GWEI; while the network needs more, new relays wait (approved, no attempt used), stuck ones are not
 * replaced above it and /health is degraded with the reason; when fees fall, everything moves by itself. On a real
 * anvil whose base fee is raised with anvil_setNextBlockBaseFeePerGas and lowered by mining empty blocks (each
 * lowers it by 1/8).
 */

const GWEI = 10n ** 9n;
const CEILING_GWEI = 50n;
const CEILING = CEILING_GWEI * GWEI;

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
/** In front of anvil: while `holdBroadcasts`, every request carrying a broadcast is answered 503 (an outage). */
let proxy: RpcProxy;
let holdBroadcasts = false;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  proxy = await startRpcProxy(fx.anvil.rpcUrl, (body) =>
    holdBroadcasts && body.includes('"eth_sendRawTransaction"') ? { status: 503, contentType: "text/plain", body: "Service Unavailable" } : undefined,
  );
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  holdBroadcasts = false;
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

afterAll(async () => {
  await proxy?.close();
});

async function baseFee(): Promise<bigint> {
  return (await fx.clients.getBlock({ blockTag: "latest" })).baseFeePerGas ?? 0n;
}

/** Mines one block whose base fee is `wei`. */
async function mineWithBaseFee(wei: bigint): Promise<void> {
  await anvilRpc(fx, "anvil_setNextBlockBaseFeePerGas", [`0x${wei.toString(16)}`]);
  await anvilRpc(fx, "evm_mine");
  expect(await baseFee()).toBe(wei);
}

/** Empty blocks until the base fee is at most `wei` (each empty block lowers it by 1/8). */
async function mineUntilBaseFeeAtMost(wei: bigint): Promise<void> {
  for (let i = 0; i < 100 && (await baseFee()) > wei; i++) await anvilRpc(fx, "evm_mine");
  expect(await baseFee()).toBeLessThanOrEqual(wei);
}

/** Passes of a worker stage so far (this process's worker registry). */
async function stagePasses(stage: string): Promise<number> {
  const metric = await getWorkerMetrics().registry.getSingleMetric("sponsorship_worker_step_seconds")!.get();
  const values = metric.values as { metricName?: string; labels: Record<string, string | number>; value: number }[];
  return values.filter((v) => v.metricName === "sponsorship_worker_step_seconds_count" && v.labels.stage === stage).reduce((a, v) => a + v.value, 0);
}

async function health() {
  return checkHealth({ db: fx.database.db, config: fx.config({ MAX_FEE_PER_GAS_GWEI: String(CEILING_GWEI) }) });
}

describe("MAX_FEE_PER_GAS_GWEI, the fee ceiling", () => {
  it("sends no relay while the base fee is above it (request approved, health degraded), then completes with attempt 1 under it once fees fall", async () => {
    await mineWithBaseFee(100n * GWEI);
    worker = await startInProcessWorker(fx, { MAX_FEE_PER_GAS_GWEI: String(CEILING_GWEI) });
    const { id } = await createRequest(fx);

    // Reviewed and approved, then the relay stage saw the fees above the ceiling and signed nothing.
    await waitFor(
      "the request approved and the fees seen above the ceiling",
      async () => (await readRequest(fx, id)).status === "approved" && worker!.ctx.feeCeiling?.state.aboveCeiling === true,
    );
    const passes = await stagePasses("relay");
    await waitFor("three more relay passes", async () => (await stagePasses("relay")) >= passes + 3, 30_000);
    expect((await readRequest(fx, id)).status).toBe("approved");
    expect(await readRelays(fx, id)).toEqual([]);

    const above = await health();
    healthResponse.parse(above.body);
    expect(above.httpStatus).toBe(200);
    expect(above.body.status).toBe("degraded");
    expect(above.body.checks.fees).toMatchObject({
      status: "degraded",
      code: "fees_above_ceiling",
      ceilingWei: CEILING.toString(),
      baseFeeWei: (100n * GWEI).toString(),
    });

    // Fees fall (empty blocks): the request moves by itself, first attempt, under the ceiling.
    await mineUntilBaseFeeAtMost(CEILING);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(relays[0]!.maxFeePerGas!).toBeLessThanOrEqual(CEILING);
    expect(worker.ctx.feeCeiling?.state.aboveCeiling).toBe(false);
    // /health reads the chain at most every CHAIN_CACHE_MS.
    await waitFor("health's fees check ok", async () => (await health()).body.checks.fees?.status === "ok", 10_000);
  }, 90_000);

  it("does not replace a stuck transaction while the base fee is above the ceiling; once fees fall the request completes, every attempt under it", async () => {
    await mineWithBaseFee(10n * GWEI);
    await anvilRpc(fx, "evm_setAutomine", [false]);
    worker = await startInProcessWorker(fx, { MAX_FEE_PER_GAS_GWEI: String(CEILING_GWEI), RELAY_TIMEOUT_MS: "1000" });
    const { id } = await createRequest(fx);
    const first = await waitFor("the first attempt to be submitted", async () => {
      const [r] = await readRelays(fx, id);
      return r?.status === "submitted" ? r : undefined;
    });
    expect(first.maxFeePerGas!).toBeLessThanOrEqual(CEILING);

    // The next block asks more than the ceiling: the attempt is not mined, and stays unmined past RELAY_TIMEOUT_MS.
    await mineWithBaseFee(100n * GWEI);
    const passes = await stagePasses("confirm");
    await waitFor(
      "three relay timeouts and confirm passes",
      async () => {
        const age = Date.now() - first.submittedAt!.getTime();
        return age >= 3_000 && (await stagePasses("confirm")) >= passes + 3;
      },
      30_000,
      250,
    );
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status, r.failureReason])).toEqual([[1, "submitted", null]]);
    expect(worker.ctx.feeCeiling?.state.aboveCeiling).toBe(true);

    // Fees fall to what attempt 1 offers: it is mined as it is.
    await mineUntilBaseFeeAtMost(first.maxFeePerGas!);
    await anvilRpc(fx, "evm_setAutomine", [true]);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const relays = await readRelays(fx, id);
    expect(relays.filter((r) => r.status === "confirmed")).toHaveLength(1);
    for (const r of relays) expect(r.maxFeePerGas!).toBeLessThanOrEqual(CEILING);
  }, 90_000);
});

describe("a fee spike before the first broadcast", () => {
  it("re-prices an attempt no node has taken once the base fee rises above its max fee, burning no attempt: the relayer is not wedged behind it (MAX_RELAY_ATTEMPTS=1)", async () => {
    await mineWithBaseFee(GWEI);
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, RELAY_TIMEOUT_MS: "1000", MAX_RELAY_ATTEMPTS: "1" });
    // The broadcast meets an outage: the attempt is stored, signed at today's fees, and stays queued.
    holdBroadcasts = true;
    const { id } = await createRequest(fx);
    const first = await waitFor("the first attempt stored, not broadcast", async () => {
      const [r] = await readRelays(fx, id);
      return r?.status === "queued" ? r : undefined;
    });
    // An outage alone is waited out, however long: the attempt's max fee still covers the base fee.
    const passes = await stagePasses("confirm");
    await waitFor(
      "4 s past RELAY_TIMEOUT_MS and ten more confirm passes",
      async () => Date.now() - first.createdAt.getTime() >= 5_000 && (await stagePasses("confirm")) >= passes + 10,
      30_000,
      250,
    );
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "queued"]]);

    // Before the node is back, the base fee rises above what the attempt offers: the node now refuses it
    // ("max fee per gas less than block base fee"), which only a fall of the base fee would mend. Nothing mines a
    // block here (automine, and nothing is accepted), so it does not fall.
    const spike = first.maxFeePerGas! * 4n;
    await mineWithBaseFee(spike);
    holdBroadcasts = false;

    // Re-priced at the same nonce as attempt 2; attempt 1 reached no node, so it burned nothing: with one attempt
    // allowed, the nonce is not cancelled and the request completes.
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const relays = await readRelays(fx, id);
    expect(relays.map((r) => [r.relayAttempt, r.nonce, r.status])).toEqual([
      [1, first.nonce, "failed"],
      [2, first.nonce, "confirmed"],
    ]);
    expect(relays[0]!.failureReason).toMatch(/^superseded/);
    expect(relays[0]!.submittedAt).toBeNull();
    expect(relays[1]!.maxFeePerGas!).toBeGreaterThanOrEqual(spike);
  }, 60_000);
});

describe("the fee ceiling's episode", () => {
  it("measures how long fees were above the ceiling on a monotonic clock: a step of the wall clock does not change it", () => {
    const watch = new FeeCeilingWatch(10n);
    const changes: FeeCeilingChange[] = [];
    watch.onChange = (change) => changes.push(change);
    const fees = (baseFeePerGas: bigint) => ({ baseFeePerGas, maxFeePerGas: 10n, maxPriorityFeePerGas: 1n, aboveCeiling: baseFeePerGas > 10n });
    watch.note(fees(20n));
    // Before, the length was the wall clock's: an hour's step back in the episode made it about minus an hour.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      watch.note(fees(5n));
    } finally {
      vi.useRealTimers();
    }
    expect(changes.map((c) => c.aboveCeiling)).toEqual([true, false]);
    expect(changes[1]!.lastedMs).toBeGreaterThanOrEqual(0);
    expect(changes[1]!.lastedMs).toBeLessThan(60_000);
  });
});
