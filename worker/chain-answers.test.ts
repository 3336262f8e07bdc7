import { describe, expect, it } from "vitest";
import { classifyBroadcastError, combineBroadcastOutcomes, type BroadcastOutcome } from "./chain-answers";

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
  ])("reads %j as %s", (message, kind) => {
    expect(classifyBroadcastError(new Error(message)).kind).toBe(kind);
  });

  it("is a refusal of several endpoints when none accepted it, even while one is down (it would wait for as long)", () => {
    const rejected: BroadcastOutcome = { kind: "rejected", message: "transaction underpriced" };
    const unavailable: BroadcastOutcome = { kind: "unavailable", message: "fetch failed" };
    expect(combineBroadcastOutcomes([rejected, { kind: "accepted" }]).kind).toBe("accepted");
    expect(combineBroadcastOutcomes([unavailable, rejected]).kind).toBe("rejected");
    expect(combineBroadcastOutcomes([unavailable, unavailable]).kind).toBe("unavailable");
  });
});
