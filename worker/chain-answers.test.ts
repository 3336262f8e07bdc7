import { RpcRequestError } from "viem";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ChainHealth, classifyBroadcastError, combineBroadcastOutcomes, type BroadcastOutcome } from "./chain-answers";

/** How a node's answer to eth_sendRawTransaction is read (worker/stages/broadcast.ts acts on it). */
describe("a node's refusal of a broadcast", () => {
  it.each([
    ["already known", "accepted"],
    ["AlreadyKnown", "accepted"], // Nethermind
    ["nonce too low", "nonce_used"],
    ["OldNonce", "nonce_used"], // Nethermind
    ["nonce too high", "unavailable"], // geth: the node lacks an earlier transaction of the sender
    ["NonceGap", "unavailable"], // Nethermind
    ["transaction underpriced", "rejected"],
    ["intrinsic gas too low", "rejected"],
    ["exceeds block gas limit", "rejected"],
    ["invalid sender", "rejected"],
    ["tx fee (2.00 ether) exceeds the configured cap (1.00 ether)", "rejected"],
    // The node or a gateway failed, it did not judge the transaction (it may even have passed it on).
    ["Internal error", "unavailable"],
    ["request timed out", "unavailable"],
    ["upstream request timeout", "unavailable"],
    ["header not found", "unavailable"],
    ["context deadline exceeded", "unavailable"],
  ])("reads %j as %s", (message, kind) => {
    expect(classifyBroadcastError(new Error(message)).kind).toBe(kind);
  });

  it("reads JSON-RPC's internal error (-32603) as the node's failure, whatever its words", () => {
    const error = new RpcRequestError({ body: {}, url: "http://node", error: { code: -32603, message: "something broke" } });
    expect(classifyBroadcastError(error).kind).toBe("unavailable");
    const verdict = new RpcRequestError({ body: {}, url: "http://node", error: { code: -32000, message: "something broke" } });
    expect(classifyBroadcastError(verdict).kind).toBe("rejected");
  });

  it("is a refusal of several endpoints when none accepted it, even while one is down (it would wait for as long)", () => {
    const rejected: BroadcastOutcome = { kind: "rejected", message: "transaction underpriced" };
    const unavailable: BroadcastOutcome = { kind: "unavailable", message: "fetch failed" };
    expect(combineBroadcastOutcomes([rejected, { kind: "accepted" }]).kind).toBe("accepted");
    expect(combineBroadcastOutcomes([unavailable, rejected]).kind).toBe("rejected");
    expect(combineBroadcastOutcomes([unavailable, unavailable]).kind).toBe("unavailable");
  });
});

describe("the time the chain was reachable, which the relay timeout counts (ChainHealth.reachableWithinMs)", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is the window less the outages in it, not the time since the last one ended", () => {
    vi.useFakeTimers({ toFake: ["performance"] });
    const health = new ChainHealth();
    vi.advanceTimersByTime(10_000);
    expect(health.reachableWithinMs(5_000)).toBe(5_000);
    // No further back than the worker's start.
    expect(health.reachableWithinMs(60_000)).toBe(10_000);
    // One 200-ms outage, then one still going for 300 ms.
    health.noteUnreachable(new Error("429"));
    vi.advanceTimersByTime(200);
    health.noteReached();
    vi.advanceTimersByTime(1_000);
    expect(health.reachableWithinMs(5_000)).toBe(4_800);
    health.noteUnreachable(new Error("timeout"));
    vi.advanceTimersByTime(300);
    expect(health.reachableWithinMs(5_000)).toBe(4_500);
    // An outage only partly inside the window counts only for that part.
    health.noteReached();
    expect(health.reachableWithinMs(400)).toBe(100);
  });
});
