import { HttpRequestError, TimeoutError } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { startTestChain } from "@/test/chain";
import { startSilentRpcProxy, type SilentRpcProxy } from "@/test/rpc-proxy";
import { createChainClients } from "./clients";
import { BEST_HEAD_KEPT_MS, COOL_OFF_MS, EndpointBreaker, MAX_COOL_OFF_MS, coolOffAfter } from "./endpoint-breaker";

/**
 * decisions.md "Several RPC endpoints": reads fail over to the next endpoint when one does not answer. The breaker
 * decides the order: an endpoint not reached lately is left aside for a bounded cool-off, then asked again; one more
 * than LAGGING_BLOCKS behind the best head seen is left aside until it catches up.
 */

const urls = ["http://a.invalid", "http://b.invalid", "http://c.invalid"];
const silence = () => new TimeoutError({ body: {}, url: "http://a.invalid" });

describe("the endpoints' breaker", () => {
  it("leaves an endpoint that was not reached aside for a cool-off that doubles up to a minute, then lets the next read re-probe it", () => {
    const breaker = new EndpointBreaker(urls, { reprobe: "reads", probeMs: 5_000 });
    expect(breaker.readOrder(0)).toEqual([0, 1, 2]);
    breaker.noteAnswer(0, silence(), 0);
    // Asked after the others while it cools off: only a read every other endpoint failed reaches it.
    expect(breaker.readOrder(1)).toEqual([1, 2, 0]);
    // A failure of a call already on its way (or a broadcast) while it cools off does not lengthen the cool-off.
    breaker.noteAnswer(0, silence(), 4_000);
    expect(breaker.endpoints[0]).toMatchObject({ failures: 1, coolingOffUntilMs: COOL_OFF_MS, reachable: false });
    // Its cool-off over: back in its place; the read that asks it keeps the others off it until it answers.
    expect(breaker.readOrder(COOL_OFF_MS)).toEqual([0, 1, 2]);
    breaker.asking(0, COOL_OFF_MS);
    expect(breaker.readOrder(COOL_OFF_MS + 1)).toEqual([1, 2, 0]);
    breaker.noteAnswer(0, silence(), COOL_OFF_MS + 5_000);
    expect(breaker.endpoints[0]!.coolingOffUntilMs).toBe(COOL_OFF_MS + 5_000 + 2 * COOL_OFF_MS);
    expect([1, 2, 3, 4, 10, 50].map(coolOffAfter)).toEqual([COOL_OFF_MS, 2 * COOL_OFF_MS, 4 * COOL_OFF_MS, MAX_COOL_OFF_MS, MAX_COOL_OFF_MS, MAX_COOL_OFF_MS]);
    // Any answer closes it, a refusal too (the node was reached).
    breaker.noteAnswer(0, new Error("execution reverted"), 40_000);
    expect(breaker.endpoints[0]).toMatchObject({ failures: 0, coolingOffUntilMs: 0, reachable: true });
    expect(breaker.readOrder(40_000)).toEqual([0, 1, 2]);
  });

  it("asks the endpoints cooling off after the others, the one whose cool-off ends first first", () => {
    const breaker = new EndpointBreaker(urls, { reprobe: "survey" });
    breaker.noteAnswer(1, silence(), 0);
    breaker.noteAnswer(0, new HttpRequestError({ url: urls[0]!, status: 503 }), 100);
    expect(breaker.readOrder(200)).toEqual([2, 1, 0]);
    breaker.noteAnswer(2, silence(), 300);
    expect(breaker.readOrder(400)).toEqual([1, 0, 2]);
    // An HTTP 4xx other than 429 reached a server that refused: not a failure to reach it.
    breaker.noteAnswer(2, new HttpRequestError({ url: urls[2]!, status: 401 }), 500);
    expect(breaker.readOrder(600)).toEqual([2, 1, 0]);
  });

  it("with reprobe 'survey', leaves a failed endpoint out of reads after its cool-off until a survey finds it answering", () => {
    const breaker = new EndpointBreaker(urls, { reprobe: "survey", probeMs: 5_000 });
    breaker.noteAnswer(0, silence(), 0);
    expect(breaker.surveyTargets(1)).toEqual([1, 2]);
    expect(breaker.readOrder(COOL_OFF_MS + 1)).toEqual([1, 2, 0]);
    expect(breaker.surveyTargets(COOL_OFF_MS + 1)).toEqual([0, 1, 2]);
    breaker.asking(0, COOL_OFF_MS + 1);
    expect(breaker.surveyTargets(COOL_OFF_MS + 2)).toEqual([1, 2]);
    breaker.noteAnswer(0, undefined, COOL_OFF_MS + 3);
    expect(breaker.readOrder(COOL_OFF_MS + 4)).toEqual([0, 1, 2]);
  });

  it("lets the best head fall once no endpoint has come near it for a minute: the one left is not held behind a head nobody shows", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    breaker.noteHeads(
      new Map([
        [0, 100n],
        [1, 104n],
      ]),
      0,
    );
    expect(breaker.endpoints[0]!.behind).toBe(true);
    // Endpoint 1 gone (cooling off, not surveyed): within the minute endpoint 0 stays aside.
    breaker.noteHeads(new Map([[0, 100n]]), BEST_HEAD_KEPT_MS - 1);
    expect([breaker.bestHead, breaker.endpoints[0]!.behind]).toEqual([104n, true]);
    // Before: the best head only rose, so endpoint 0 was behind for good and every read went to the dead endpoint 1.
    breaker.noteHeads(new Map([[0, 100n]]), BEST_HEAD_KEPT_MS + 1);
    expect([breaker.bestHead, breaker.endpoints[0]!.behind]).toEqual([100n, false]);
    expect(breaker.readOrder(BEST_HEAD_KEPT_MS + 1)[0]).toBe(0);
  });

  it("leaves aside an endpoint more than 3 blocks behind the best head seen until it is within 3 again", () => {
    const changes: string[] = [];
    const breaker = new EndpointBreaker(urls, { reprobe: "survey", onChange: (i, _, c) => changes.push(`${i}:${c.kind}`) });
    breaker.noteHeads(
      new Map([
        [0, 100n],
        [1, 103n],
        [2, 104n],
      ]),
    );
    expect(breaker.endpoints.map((e) => e.behind)).toEqual([true, false, false]);
    expect(breaker.readOrder()).toEqual([1, 2]);
    // The best head only rises: the endpoint that was ahead gone, the one behind stays aside while it does not move.
    breaker.noteHeads(new Map([[0, 100n]]));
    expect(breaker.bestHead).toBe(104n);
    expect(breaker.endpoints[0]!.behind).toBe(true);
    breaker.noteHeads(
      new Map([
        [0, 101n],
        [1, 104n],
      ]),
    );
    expect(breaker.endpoints[0]!.behind).toBe(false);
    // Every endpoint below the best head seen (a test chain reset): the best head is what they say now.
    breaker.noteHeads(
      new Map([
        [0, 5n],
        [1, 6n],
        [2, 6n],
      ]),
    );
    expect(breaker.bestHead).toBe(6n);
    expect(breaker.endpoints.map((e) => e.behind)).toEqual([false, false, false]);
    expect(changes).toEqual(["0:behind", "0:caught_up"]);
  });
});

describe("reads over several endpoints", () => {
  let chain: Anvil;
  let silent: SilentRpcProxy;

  beforeAll(async () => {
    chain = await startTestChain();
    silent = await startSilentRpcProxy(chain.rpcUrl);
  });

  afterAll(async () => {
    await silent?.close();
    await chain?.stop();
  });

  it("wait out a silent first endpoint once, then go straight to the next one while it cools off", async () => {
    const client = createChainClients({ rpcUrl: [silent.url, chain.rpcUrl], timeoutMs: 500, retryCount: 0 });
    expect(await client.getChainId()).toBe(31337);
    expect(silent.requests()).toBe(1);
    const started = performance.now();
    for (let i = 0; i < 3; i++) await client.getBlockNumber({ cacheTime: 0 });
    expect(performance.now() - started).toBeLessThan(500);
    expect(silent.requests()).toBe(1);
  });
});
