import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { keptLog } from "@/test/kept-log";
import { startRefusingRpcProxy, type RefusingRpcProxy } from "@/test/rpc-proxy";
import {
  createRequest,
  readRelays,
  readRequest,
  relayerAddress,
  setUpPipelineFixture,
  startInProcessWorker,
  waitFor,
  type PipelineFixture,
} from "@/test/worker-fixture";
import type { RunningWorker } from "./worker";

/**
 * A provider that does not serve eth_getLogs at all (some hosted plans; others limit it to a few hundred blocks).
 * The confirm stage asks the treasury's Sponsored events before it takes a nonce used by a transaction this service
 * did not send as dropped (worker/stages/confirm/settle.ts). Before, every endpoint's refusal of that search was
 * thrown through the whole confirm pass, ahead of its watch and hole parts: no stored transaction of any relayer was
 * broadcast again, replaced or filled, and after 30 passes the worker exited as stuck, again at each restart. Now
 * the refusal is waited out for replayPatienceMs, the nonce is then decided without the events, and a failing part
 * of the pass no longer holds the others.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let provider: RefusingRpcProxy;
let refuseBroadcasts = true;
let treasuryLogSearches = 0;
/** Instead of refusing eth_getLogs, answer it with something that is not a list of logs (a broken gateway). */
let malformedLogs = false;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  const treasury = fx.deployment.treasuryAddress.toLowerCase();
  provider = await startRefusingRpcProxy(fx.anvil.rpcUrl, (call) => {
    if (call.method === "eth_sendRawTransaction" && refuseBroadcasts) return { code: -32005, message: "rate limit exceeded, try again later" };
    if (call.method !== "eth_getLogs") return undefined;
    const filter = call.params?.[0] as { address?: string } | undefined;
    if (filter?.address?.toLowerCase() === treasury) treasuryLogSearches++;
    if (malformedLogs) return { result: "0xdeadbeef" };
    return { code: -32601, message: "the method eth_getLogs does not exist/is not available" };
  });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  refuseBroadcasts = true;
  treasuryLogSearches = 0;
  malformedLogs = false;
});

/**
 * r1's attempt stored with its broadcast refused, its nonce then used outside the service (so the confirm stage
 * searches the Sponsored events for it), and r2's attempt stored with its broadcast refused; then broadcasts are
 * accepted again.
 */
async function nonceUsedElsewhereBesideAQueuedAttempt(): Promise<{ r1: { id: string }; r2: { id: string } }> {
  const r1 = await createRequest(fx);
  const [queued] = await waitFor("r1's attempt to be stored", async () => {
    const relays = await readRelays(fx, r1.id);
    return relays.some((r) => r.status === "queued") ? relays : undefined;
  });
  const key = fx.relayerKeys[0]!;
  await fx.clients.walletClient(key).sendTransaction({ to: relayerAddress(key), value: 0n, nonce: queued!.nonce } as never);
  await waitFor("the confirm stage to search the Sponsored events", async () => treasuryLogSearches > 0);
  const r2 = await createRequest(fx);
  await waitFor("r2's attempt to be stored", async () => (await readRelays(fx, r2.id)).some((r) => r.status === "queued"));
  refuseBroadcasts = false;
  return { r1, r2 };
}

afterAll(async () => {
  await provider?.close();
});

describe("an RPC provider that refuses eth_getLogs", () => {
  it("still broadcasts the other transactions again while a nonce waits for the event search, then decides that nonce without it", async () => {
    const { log, lines } = keptLog();
    worker = await startInProcessWorker(fx, { RPC_URL: provider.url, RELAY_TIMEOUT_MS: "600000" }, { replayPatienceMs: 3_000 }, log);

    // The broadcasts are refused as a rate limit: the attempts stay queued, none is burned.
    const { r1, r2 } = await nonceUsedElsewhereBesideAQueuedAttempt();

    // r2 is broadcast again from its stored bytes and completes, while r1's nonce still waits for the search.
    await waitFor("r2 to complete", async () => (await readRequest(fx, r2.id)).status === "completed", 20_000);
    expect((await readRelays(fx, r2.id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);

    // Once the patience has passed, r1's nonce is decided without the events: dropped, and the next attempt pays.
    await waitFor("r1 to complete", async () => (await readRequest(fx, r1.id)).status === "completed", 30_000);
    const r1Relays = await readRelays(fx, r1.id);
    expect(r1Relays.map((r) => [r.relayAttempt, r.status])).toEqual([
      [1, "failed"],
      [2, "confirmed"],
    ]);
    expect(r1Relays[0]!.failureReason).toMatch(/^dropped: nonce \d+ of 0x[0-9a-f]{40} was used by a transaction this service did not send/);
    expect(lines.some((l) => l.level === "warn" && l.msg.startsWith("the RPC refuses the search for Sponsored events"))).toBe(true);
    expect(lines.some((l) => l.level === "warn" && l.msg.startsWith("nonce decided without the Sponsored events"))).toBe(true);
    // No stage failed: not the confirm stage, nor the registry's mirror, which waits (logged once) with no log to read.
    expect(lines.filter((l) => l.msg === "worker stage failed, backing off")).toEqual([]);
    expect(lines.filter((l) => l.msg === "registry mirror waiting: the RPC refuses eth_getLogs")).toHaveLength(1);
    expect(worker.ctx.status.totals.completed).toBe(2);
  }, 90_000);

  it("goes on broadcasting when settling one nonce fails for another reason (a malformed answer): the other parts of the pass still run", async () => {
    // Not a refusal: a gateway answering eth_getLogs with something else than logs. Settling r1's nonce fails at each
    // pass (the error is logged and counted, as before); watching r2's queued attempt runs regardless.
    malformedLogs = true;
    const { log, lines } = keptLog();
    worker = await startInProcessWorker(fx, { RPC_URL: provider.url, RELAY_TIMEOUT_MS: "600000" }, { replayPatienceMs: 600_000 }, log);
    const { r1, r2 } = await nonceUsedElsewhereBesideAQueuedAttempt();
    await waitFor("r2 to complete", async () => (await readRequest(fx, r2.id)).status === "completed", 20_000);
    expect((await readRelays(fx, r2.id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    // r1's nonce is left undecided (nothing said whether one of its hashes paid), and the failure is not hidden.
    expect((await readRequest(fx, r1.id)).status).toBe("relayed");
    expect(lines.some((l) => l.msg === "worker stage failed, backing off" && l.fields?.stage === "confirm")).toBe(true);
  }, 90_000);
});
