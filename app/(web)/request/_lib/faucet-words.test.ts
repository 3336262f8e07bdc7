import { describe, expect, it } from "vitest";
import { describeFaucet, formatAmount, formatUsualTime } from "./faucet-words";

describe("the faucet's status in plain words", () => {
  it("lets the form be used while operating or low on funds, and not otherwise", () => {
    expect(describeFaucet({ state: "operating" }).serving).toBe(true);
    expect(describeFaucet({ state: "low_funds" }).serving).toBe(true);
    for (const state of ["paused", "budget_exhausted", "empty", "chain_unreachable"] as const) {
      expect(describeFaucet({ state }).serving, state).toBe(false);
    }
    expect(describeFaucet({ state: "paused" }).label).toBe("Paused");
  });

  it("shows the amount in tokens with its symbol", () => {
    expect(formatAmount("10000000000000000", "ETH")).toBe("0.01 ETH");
    expect(formatAmount("1000000000000000000", "POL")).toBe("1 POL");
  });

  it("rounds the usual time to seconds, minutes past a minute and a half, or half hours past 90 minutes", () => {
    expect(formatUsualTime(null)).toBeNull();
    expect(formatUsualTime(4.4)).toBe("about 4 seconds");
    expect(formatUsualTime(1)).toBe("about 1 second");
    expect(formatUsualTime(600)).toBe("about 10 minutes");
    // Under half a second is shown as one, in the singular (before: "about 1 seconds").
    expect(formatUsualTime(0.4)).toBe("about 1 second");
    expect(formatUsualTime(5_399)).toBe("about 90 minutes");
    expect(formatUsualTime(3 * 3600)).toBe("about 3 hours");
    expect(formatUsualTime(5_400)).toBe("about 1.5 hours");
    expect(formatUsualTime(2 * 3600 + 900)).toBe("about 2.5 hours");
    expect(formatUsualTime(2 * 3600 + 899)).toBe("about 2 hours");
  });
});
