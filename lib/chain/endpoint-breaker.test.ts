import { HttpRequestError, TimeoutError } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Anvil } from "@/contracts/anvil";
import { startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";
import { startSilentRpcProxy, type SilentRpcProxy } from "@/test/rpc-proxy";
import { createChainClients } from "./clients";
import { BEST_HEAD_KEPT_MS, CHAIN_ID_FRESH_MS, COOL_OFF_MS, EndpointBreaker, LAGGING_MS, MAX_COOL_OFF_MS, coolOffAfter } from "./endpoint-breaker";

/**
 * decisions.md "Several RPC endpoints": reads fail over to the next endpoint when one does not answer. The breaker
 * decides the order: an endpoint not reached lately is left aside for a bounded cool-off, then asked again; one more
 * than LAGGING_BLOCKS behind the best head seen, at a head the best head had passed LAGGING_MS before, is left aside
 * until it catches up.
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

describe("endpoints of another chain", () => {
  it("once the chain is set, reads and surveys' heads take only endpoints that answered its id; one of another chain is left aside until it answers this one again, told once per change", () => {
    const changes: string[] = [];
    const breaker = new EndpointBreaker(urls, { reprobe: "survey", onChange: (i, _, c) => changes.push(`${i}:${c.kind}`) });
    // Start-up: the first two answered chain 11155111, the third was silent.
    breaker.noteChainId(0, 11155111);
    breaker.noteChainId(1, 11155111);
    breaker.noteAnswer(2, silence(), 0);
    breaker.useChain(11155111);
    expect(breaker.readOrder(COOL_OFF_MS + 1)).toEqual([0, 1]);
    expect(breaker.askable()).toEqual([true, true, false]);
    // Its cool-off over, a survey asks it (its chain id with its head); a head of unknown chain does not count.
    expect(breaker.surveyTargets(COOL_OFF_MS + 1)).toEqual([0, 1, 2]);
    breaker.noteAnswer(2, undefined, COOL_OFF_MS + 2);
    breaker.noteHeads(
      new Map([
        [0, 100n],
        [1, 100n],
        [2, 21_000_000n],
      ]),
      COOL_OFF_MS + 2,
    );
    expect([breaker.bestHead, breaker.endpoints.map((e) => e.behind)]).toEqual([100n, [false, false, false]]);
    expect(breaker.readOrder(COOL_OFF_MS + 3)).toEqual([0, 1]);
    // It serves mainnet: aside from reads and broadcasts; surveys still ask it (its chain id alone).
    breaker.noteChainId(2, 1);
    breaker.noteChainId(2, 1);
    expect(breaker.endpoints[2]).toMatchObject({ chainId: 1, otherChain: true, head: undefined });
    expect(changes).toEqual(["2:cooling_off", "2:answers_again", "2:other_chain"]);
    expect(breaker.surveyTargets(COOL_OFF_MS + 4)).toEqual([0, 1, 2]);
    expect(breaker.askable()).toEqual([true, true, false]);
    // Every other endpoint cooling off: reads still never reach it.
    breaker.noteAnswer(0, silence(), COOL_OFF_MS + 5);
    breaker.noteAnswer(1, silence(), COOL_OFF_MS + 5);
    expect(breaker.readOrder(COOL_OFF_MS + 6)).toEqual([0, 1]);
    // An endpoint that served the chain and answers another id later (moved to another network) is left aside too;
    // one that answers this chain's id again is read again, each change told once.
    breaker.noteChainId(0, 8453);
    expect(breaker.readOrder(COOL_OFF_MS + 7)).toEqual([1]);
    breaker.noteChainId(2, 11155111);
    breaker.noteChainId(2, 11155111);
    expect(breaker.askable()).toEqual([false, true, true]);
    expect(breaker.endpoints[2]).toMatchObject({ chainId: 11155111, otherChain: false });
    expect(changes.slice(3)).toEqual(["0:cooling_off", "1:cooling_off", "0:other_chain", "2:serves_chain"]);
  });

  it("checks no chain id while none is set (the web server's reads), and one endpoint is always asked but while it answers another chain id", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "reads" });
    breaker.noteChainId(1, 1);
    expect(breaker.readOrder()).toEqual([0, 1]);
    const single = new EndpointBreaker(urls.slice(0, 1), { reprobe: "survey" });
    single.useChain(31337);
    expect(single.readOrder()).toEqual([0]);
    expect(single.askable()).toEqual([true]);
    // Not reached: still asked (nothing to fail over to).
    single.noteAnswer(0, silence(), 0);
    expect(single.readOrder(1)).toEqual([0]);
    // Another chain's id: no read, no broadcast decides, until it answers this one again.
    single.noteChainId(0, 31338);
    expect([single.readOrder(2), single.askable(), single.surveyTargets(COOL_OFF_MS + 1)]).toEqual([[], [false], [0]]);
    single.noteChainId(0, 31337, 3);
    expect([single.readOrder(3), single.askable()]).toEqual([[0], [true]]);
    // Its answer vouches for the next read for CHAIN_ID_FRESH_MS (the maintenance check's survey, then its reads).
    expect([single.chainIdFresh(0, 3 + CHAIN_ID_FRESH_MS - 1), single.chainIdFresh(0, 3 + CHAIN_ID_FRESH_MS)]).toEqual([true, false]);
    single.noteChainId(0, 31338, 4);
    expect(single.chainIdFresh(0, 5)).toBe(false);
  });
});

/** Surveys every `everyMs` from `fromMs` to `toMs`: endpoint i answers `heads(t)[i]`; returns the changes, "t:i:kind". */
function survey(breaker: EndpointBreaker, heads: (t: number) => bigint[], fromMs: number, toMs: number, everyMs = 2_000): string[] {
  const changes: string[] = [];
  for (let t = fromMs; t <= toMs; t += everyMs) {
    const before = breaker.endpoints.map((e) => e.behind);
    breaker.noteHeads(new Map(heads(t).map((h, i) => [i, h])), t);
    breaker.endpoints.forEach((e, i) => e.behind !== before[i] && changes.push(`${t}:${i}:${e.behind ? "behind" : "caught_up"}`));
  }
  return changes;
}

describe("behind: by LAGGING_BLOCKS and by LAGGING_MS", () => {
  // A chain of 0.25-s blocks (Arbitrum's pace): 3 blocks are 750 ms, less than a node's ordinary propagation delay.
  const fast = (t: number) => 1_000n + BigInt(Math.floor(t / 250));

  it("does not leave aside a healthy endpoint of a chain of 0.25-s blocks that lags up to 2 s (8 blocks) now and then", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    // Surveys every 2 s for a minute; the second endpoint is 1 block late at one, 8 at the next.
    const changes = survey(breaker, (t) => [fast(t), fast(t) - (t % 4_000 === 0 ? 1n : 8n)], 0, 60_000);
    // Before: behind at every other survey and caught up at the next, 30 flaps (each a log line, and reads moving).
    expect(changes).toEqual([]);
    expect(breaker.readOrder(60_000)).toEqual([0, 1]);
  });

  it("leaves aside an endpoint of that chain that stopped, once the best head passed it LAGGING_MS before (within a survey or two more)", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    const stoppedAt = 10_000;
    const changes = survey(breaker, (t) => [fast(t), fast(Math.min(t, stoppedAt))], 0, 40_000);
    expect(changes).toHaveLength(1);
    const [at] = changes[0]!.split(":").map(Number);
    // Not before the chain has been past it for LAGGING_MS (before: at the next survey, 8 blocks and 2 s behind)...
    expect(at).toBeGreaterThan(stoppedAt + LAGGING_MS);
    // ...and within LAGGING_MS and two surveys of it (the time the chain passed it is known to a survey's precision).
    expect(at).toBeLessThanOrEqual(stoppedAt + LAGGING_MS + 2 * 2_000);
    expect(changes[0]).toBe(`${at}:1:behind`);
    expect(breaker.readOrder(40_000)).toEqual([0]);
  });

  it("with 5 blocks mined in one instant on a chain that stalls, the endpoint that did not follow is behind LAGGING_MS after the burst, and stays so", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    // A chain mined on demand (anvil with blockTime 0, anvil_mine 5): both at 100, then 5 blocks at 11 s; the second
    // endpoint stays at 100. Read as a block interval, the burst would be a 0.4-s chain and 3 s 8 blocks, more than 5.
    const changes = survey(breaker, (t) => [t < 11_000 ? 100n : 105n, 100n], 0, 60_000);
    // The burst fell between the surveys at 10 and 12 s (it was at 11 s): the first survey LAGGING_MS after it (14 s)
    // finds the endpoint behind.
    expect(changes).toEqual([`${11_000 + LAGGING_MS}:1:behind`]);
  });

  it("with an idle worker's surveys 30 s apart on a chain of 1-s blocks, an endpoint that stopped, or lags 4 blocks, is behind at the next survey", () => {
    const second = (t: number) => 100n + BigInt(Math.floor(t / 1_000));
    const stopped = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    // Stopped at 1 s. Before (the first version of LAGGING_MS): seen behind only at 60 s, a whole idle survey late.
    expect(survey(stopped, (t) => [second(t), second(Math.min(t, 1_000))], 0, 90_000, 30_000)).toEqual(["30000:1:behind"]);
    const lagging = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    expect(survey(lagging, (t) => [second(t), t === 0 ? second(t) : second(t) - 4n], 0, 90_000, 30_000)).toEqual(["30000:1:behind"]);
  });

  it("leaves aside at once, at the first survey, an endpoint more than LAGGING_BLOCKS below: nothing tells yet how long ago the chain passed it", () => {
    const breaker = new EndpointBreaker(urls.slice(0, 2), { reprobe: "survey" });
    expect(survey(breaker, () => [105n, 100n], 0, 0)).toEqual(["0:1:behind"]);
  });

  it("on a chain of 12-s blocks, an endpoint 4 blocks (48 s) behind is behind as before, and one 3 blocks behind is not", () => {
    const slow = (t: number) => 100n + BigInt(Math.floor(t / 12_000));
    const breaker = new EndpointBreaker(urls, { reprobe: "survey" });
    const changes = survey(breaker, (t) => [slow(t), slow(t) - 3n, t < 60_000 ? slow(t) : slow(t) - 4n], 0, 120_000);
    expect(changes).toEqual(["60000:2:behind"]);
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

  it("with the worker's chain set, ask an endpoint not known yet to serve it its chain id once the others failed, and read from it only if it does", async () => {
    // Endpoint 1 answered the chain id at start-up and is down now; endpoint 2 was silent then and is up now, before
    // any survey reached it. Before: reads asked only endpoint 1 and failed until a survey (up to 30 s idle).
    const down = `http://127.0.0.1:${await freePort()}`;
    const breaker = new EndpointBreaker([down, chain.rpcUrl], { reprobe: "survey" });
    breaker.noteChainId(0, 31337);
    breaker.useChain(31337);
    const client = createChainClients({ rpcUrl: [down, chain.rpcUrl], endpoints: breaker, timeoutMs: 500, retryCount: 0 });
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBeGreaterThanOrEqual(0n);
    expect(breaker.endpoints.map((e) => [e.chainId, e.otherChain])).toEqual([
      [31337, false],
      [31337, false],
    ]);

    // The same with an endpoint of another chain: asked its chain id, not read, left aside.
    const foreign = await startTestChain({ chainId: 8453 });
    try {
      const other = new EndpointBreaker([down, foreign.rpcUrl], { reprobe: "survey" });
      other.noteChainId(0, 31337);
      other.useChain(31337);
      const misread = createChainClients({ rpcUrl: [down, foreign.rpcUrl], endpoints: other, timeoutMs: 500, retryCount: 0 });
      await expect(misread.getBlockNumber({ cacheTime: 0 })).rejects.toThrow();
      expect(other.endpoints[1]).toMatchObject({ chainId: 8453, otherChain: true });
      expect(other.unverified()).toEqual([]);
    } finally {
      await foreign.stop();
    }
  });

  it("wait out a silent first endpoint once, then go straight to the next one while it cools off", async () => {
    const client = createChainClients({ rpcUrl: [silent.url, chain.rpcUrl], timeoutMs: 500, retryCount: 0 });
    expect(await client.getChainId()).toBe(31337);
    expect(silent.requests()).toBe(1);
    // Counted, not timed: a read that waited on the silent one would have asked it again.
    for (let i = 0; i < 3; i++) await client.getBlockNumber({ cacheTime: 0 });
    expect(silent.requests()).toBe(1);
  });
});
