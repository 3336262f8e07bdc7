import type { ApiProblem } from "./api";

/** Every refusal of the API in plain words (decisions.md, "Errors"), for people rather than programs. */

export type RefusalKind =
  | "invalid_address"
  | "wallet_blocked"
  | "already_sponsored"
  | "request_open"
  | "rate_limited"
  | "budget_exhausted"
  | "sponsorships_paused"
  | "ip_blocked"
  | "wallet_not_registered"
  | "not_found"
  | "service_unavailable"
  | "other";

export type Refusal = {
  kind: RefusalKind;
  title: string;
  message: string;
  retryAfterSeconds?: number;
};

export function describeProblem(problem: ApiProblem): Refusal {
  switch (problem.code) {
    case "invalid_address":
      return {
        kind: "invalid_address",
        title: "That is not a wallet address",
        message: "A wallet address starts with 0x followed by 40 letters a–f or digits, for example 0x52908400098527886E0F7030069857D2E4169EE7.",
      };
    case "wallet_blocked":
      return {
        kind: "wallet_blocked",
        title: "This wallet is blocked",
        message: "An administrator has blocked this wallet, so it cannot be sponsored. Contact the operators if you think this is a mistake.",
      };
    case "already_sponsored":
      return {
        kind: "already_sponsored",
        title: "This wallet has already been sponsored",
        message: "Each wallet receives its first gas tokens once. This one has had them already.",
      };
    case "request_open":
      return {
        kind: "request_open",
        title: "A request for this wallet is still in progress",
        message: "Only one request per wallet can be open at a time. Follow the one already under way.",
      };
    case "rate_limited":
      return {
        kind: "rate_limited",
        title: "Too many requests",
        message: "Requests from this network or for this wallet are paused for a while to keep the service fair.",
        retryAfterSeconds: problem.retryAfterSeconds ?? 60,
      };
    case "budget_exhausted":
      return {
        kind: "budget_exhausted",
        title: "The faucet has given out all it may for now",
        message:
          "This faucet hands out a fixed amount per hour and per day, and that is used up for now. Nothing was sent; the form opens again when there is room.",
        retryAfterSeconds: problem.retryAfterSeconds ?? 60,
      };
    case "sponsorships_paused":
      return {
        kind: "sponsorships_paused",
        title: "The faucet is paused",
        message: "The operators have paused sponsorships for a while. Nothing was sent; please try again later.",
        retryAfterSeconds: problem.retryAfterSeconds ?? 60,
      };
    case "ip_blocked":
      return {
        kind: "ip_blocked",
        title: "Requests from your network are blocked",
        message: "The operators have blocked requests from your network. Contact them if you think this is a mistake.",
      };
    case "wallet_not_registered":
      return {
        kind: "wallet_not_registered",
        title: "This wallet is not registered yet",
        message: "Registration did not go through. Please submit the form again.",
      };
    case "request_not_found":
      return { kind: "not_found", title: "Request not found", message: "We could not find this request. Check the link, or start a new request." };
    case "invalid_id":
      return { kind: "not_found", title: "This link is not valid", message: "The link does not point to a request. Start a new request below." };
    case "network_error":
    case "service_unavailable":
      return {
        kind: "service_unavailable",
        title: "The service is unavailable",
        message: "We could not reach the sponsorship service. Please try again in a moment.",
      };
    default:
      if (problem.status >= 500 || problem.status === 0) {
        return {
          kind: "service_unavailable",
          title: "The service is unavailable",
          message: "The sponsorship service is having trouble right now. Please try again in a moment.",
        };
      }
      return {
        kind: "other",
        title: "The request was refused",
        message: problem.detail ?? problem.title ?? "The service refused the request. Please check the address and try again.",
      };
  }
}

/** Why a finished request did not complete, in plain words. */
export function describeOutcome(request: {
  status: string;
  eligibilityReason: string | null;
  failureReason?: string | null;
  relayTransactions?: { failureReason: string | null }[];
}): string | null {
  if (request.status === "rejected") {
    if (request.eligibilityReason === "wallet_blocked") return "The wallet was blocked before the tokens were sent, so it will not be sponsored.";
    if (request.eligibilityReason === "already_sponsored") return "The wallet had already received its tokens, so it will not be sponsored again.";
    if (request.eligibilityReason === "payment_refused") {
      return "This wallet refuses incoming payments (it is a contract whose receive function rejects the transfer), so nothing was sent. Use a wallet that can receive the native token.";
    }
    return "The request did not pass the eligibility checks.";
  }
  if (request.status === "failed" && (request.failureReason ?? "").startsWith("payment_refused")) {
    return "The wallet refused the payment when it was sent (it is a contract whose receive function rejects the transfer). Another request for it would fail the same way: use a wallet that can receive the native token.";
  }
  if (request.status === "failed") {
    const attempts = request.relayTransactions?.length ?? 0;
    const last = request.relayTransactions?.at(-1)?.failureReason ?? request.failureReason ?? null;
    const tries = attempts > 0 ? ` after ${attempts} attempt${attempts === 1 ? "" : "s"}` : "";
    const error = last ? ` Last error: ${last.replace(/\.$/, "")}.` : "";
    return `The transaction could not be completed${tries}.${error} You can submit a new request.`;
  }
  return null;
}

/** The address pattern of the interface (0x + 40 hex); `partial` tells whether typing can still make it valid. */
export function checkAddress(value: string): { valid: boolean; partial: boolean; message: string | null } {
  const v = value.trim();
  if (v === "") return { valid: false, partial: true, message: null };
  if (/^0x[0-9a-fA-F]{40}$/.test(v)) return { valid: true, partial: false, message: null };
  if (!/^(0|0x[0-9a-fA-F]*)$/.test(v)) {
    if (!v.startsWith("0x") && !(v === "0")) return { valid: false, partial: false, message: "A wallet address starts with 0x." };
    return { valid: false, partial: false, message: "Only the digits 0–9 and the letters a–f may follow 0x." };
  }
  if (v.length > 42) return { valid: false, partial: false, message: `Too long: an address has 42 characters, this has ${v.length}.` };
  return { valid: false, partial: true, message: `Keep typing: ${v.length} of 42 characters.` };
}

export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${String(r).padStart(2, "0")}` : `${m}:${String(r).padStart(2, "0")}`;
}

/**
 * A wait in words, said once to screen readers where a countdown ticks for the eyes only ("You can try again in
 * about 15 minutes."): a live region that re-read a ticking countdown would speak every second. `lead` names what
 * happens at its end (describeRecheck).
 */
export function describeWait(seconds: number, lead = "You can try again in"): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${lead} less than a minute.`;
  const minutes = Math.ceil(s / 60);
  if (minutes < 60) return `${lead} about ${minutes} minute${minutes === 1 ? "" : "s"}.`;
  // Rounded up, as the minutes: never sooner than a retry can succeed.
  const hours = Math.ceil(minutes / 60);
  return `${lead} about ${hours} hour${hours === 1 ? "" : "s"}.`;
}

/**
 * The wait of a closed faucet whose state has no known end (paused, empty, the chain unreachable), in words: when the
 * page looks again (GET /faucet's `retryAfterSeconds`), not a promise that a try will then succeed.
 */
export function describeRecheck(seconds: number): string {
  return describeWait(seconds, "This page checks again in");
}
