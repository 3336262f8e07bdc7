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

  it("is a refusal of several endpoints only when none accepted it or left it unjudged", () => {
    const rejected: BroadcastOutcome = { kind: "rejected", message: "transaction underpriced" };
    const unavailable: BroadcastOutcome = { kind: "unavailable", message: "timeout" };
    expect(combineBroadcastOutcomes([rejected, { kind: "accepted" }]).kind).toBe("accepted");
    // An endpoint that timed out may have taken it: no attempt is failed on the other's refusal.
    expect(combineBroadcastOutcomes([unavailable, rejected]).kind).toBe("unavailable");
    expect(combineBroadcastOutcomes([rejected, unavailable]).kind).toBe("unavailable");
    expect(combineBroadcastOutcomes([rejected, rejected]).kind).toBe("rejected");
  });
});
