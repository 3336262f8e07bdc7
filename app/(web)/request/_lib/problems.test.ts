import { describe, expect, it } from "vitest";
import { checkAddress, describeOutcome, describeProblem, describeRecheck, describeWait, formatCountdown } from "./problems";

describe("refusals in plain words", () => {
  it.each([
    ["invalid_address", 400, "That is not a wallet address"],
    ["wallet_blocked", 422, "This wallet is blocked"],
    ["already_sponsored", 422, "This wallet has already been sponsored"],
    ["request_open", 409, "A request for this wallet is still in progress"],
    ["wallet_not_registered", 404, "This wallet is not registered yet"],
    ["budget_exhausted", 429, "The faucet has given out all it may for now"],
    ["sponsorships_paused", 503, "The faucet is paused"],
    ["ip_blocked", 403, "Requests from your network are blocked"],
    ["network_error", 0, "The service is unavailable"],
    ["internal_error", 500, "The service is unavailable"],
    ["http_502", 502, "The service is unavailable"],
  ])("explains %s", (code, status, title) => {
    expect(describeProblem({ code, status }).title).toBe(title);
  });

  it("carries Retry-After into a rate-limit refusal", () => {
    expect(describeProblem({ code: "rate_limited", status: 429, retryAfterSeconds: 42 })).toMatchObject({ kind: "rate_limited", retryAfterSeconds: 42 });
  });

  it("falls back to the problem's own detail for codes it does not know", () => {
    expect(describeProblem({ code: "unexpected_field", status: 422, detail: "body has an unknown field" }).message).toBe("body has an unknown field");
  });
});

describe("outcomes in plain words", () => {
  it("explains a rejection by its eligibility reason", () => {
    expect(describeOutcome({ status: "rejected", eligibilityReason: "wallet_blocked" })).toMatch(/blocked/);
    expect(describeOutcome({ status: "rejected", eligibilityReason: "already_sponsored" })).toMatch(/already received/);
  });

  it("explains a wallet that refuses payment, rejected at review or failed when sent, without inviting a new request", () => {
    expect(describeOutcome({ status: "rejected", eligibilityReason: "payment_refused" })).toMatch(/refuses incoming payments/);
    const failed = describeOutcome({
      status: "failed",
      eligibilityReason: "eligible",
      failureReason: "payment_refused: the wallet refused the payment (reverted: TransferFailed(0x1))",
    });
    expect(failed).toMatch(/refused the payment/);
    expect(failed).not.toMatch(/You can submit a new request/);
  });

  it("carries Retry-After into a budget or pause refusal (the page counts down)", () => {
    expect(describeProblem({ code: "budget_exhausted", status: 429, retryAfterSeconds: 900 })).toMatchObject({
      kind: "budget_exhausted",
      retryAfterSeconds: 900,
    });
    expect(describeProblem({ code: "sponsorships_paused", status: 503, retryAfterSeconds: 60 })).toMatchObject({
      kind: "sponsorships_paused",
      retryAfterSeconds: 60,
    });
  });

  it("explains a failure with the attempts made and the last error", () => {
    const relays = [{ failureReason: "reverted" }, { failureReason: "not mined within 60 s." }];
    expect(describeOutcome({ status: "failed", eligibilityReason: "eligible", relayTransactions: relays })).toBe(
      "The transaction could not be completed after 2 attempts. Last error: not mined within 60 s. You can submit a new request.",
    );
  });

  it("has nothing to explain for a completed request", () => {
    expect(describeOutcome({ status: "completed", eligibilityReason: "eligible" })).toBeNull();
  });
});

describe("address validation as typed", () => {
  it("accepts 0x and 40 hex characters in any case", () => {
    expect(checkAddress("0x52908400098527886E0F7030069857D2E4169EE7").valid).toBe(true);
  });

  it("lets a correct prefix be typed without an error", () => {
    expect(checkAddress("0x5290")).toMatchObject({ valid: false, partial: true });
    expect(checkAddress("")).toMatchObject({ valid: false, partial: true, message: null });
  });

  it("says at once what is wrong with a value that cannot become an address", () => {
    expect(checkAddress("hello")).toMatchObject({ partial: false, message: "A wallet address starts with 0x." });
    expect(checkAddress("0x12g4")).toMatchObject({ partial: false, message: expect.stringMatching(/0–9/) });
    expect(checkAddress("0x" + "a".repeat(41))).toMatchObject({ partial: false, message: expect.stringMatching(/Too long/) });
  });
});

describe("countdown", () => {
  it("formats minutes and seconds, and hours when needed", () => {
    expect(formatCountdown(0)).toBe("0:00");
    expect(formatCountdown(65)).toBe("1:05");
    expect(formatCountdown(3725)).toBe("1:02:05");
  });
});

describe("a wait in words, for screen readers (the countdown itself is not read out)", () => {
  it.each([
    [1, "You can try again in less than a minute."],
    [59, "You can try again in less than a minute."],
    [60, "You can try again in about 1 minute."],
    [61, "You can try again in about 2 minutes."],
    [900, "You can try again in about 15 minutes."],
    [3540, "You can try again in about 59 minutes."],
    [3541, "You can try again in about 1 hour."],
    [5340, "You can try again in about 2 hours."],
    [5400, "You can try again in about 2 hours."],
  ])("says %i s as %j", (seconds, words) => {
    expect(describeWait(seconds)).toBe(words);
  });

  // A closed faucet without a known end (paused, empty, the chain unreachable): when the page looks again.
  it.each([
    [30, "This page checks again in less than a minute."],
    [60, "This page checks again in about 1 minute."],
    [120, "This page checks again in about 2 minutes."],
  ])("says a re-check in %i s as %j", (seconds, words) => {
    expect(describeRecheck(seconds)).toBe(words);
  });
});
