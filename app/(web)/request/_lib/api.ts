/**
 * The page's client for the public HTTP API: the same endpoints, bodies and problem+json errors external
 * clients use (docs/api.md). Nothing here is private to the web app.
 */

import type { RelayTransactionSummary } from "@/lib/sponsorship/schemas";

export type RequestStatus = "pending" | "approved" | "relayed" | "completed" | "rejected" | "failed";
export const TERMINAL_STATUSES: readonly RequestStatus[] = ["completed", "rejected", "failed"];
export const OPEN_STATUSES: readonly RequestStatus[] = ["pending", "approved", "relayed"];

/** A relay attempt as GET /sponsorship/:id returns it: the API's own wire schema (type only, no runtime import). */
export type RelayTransactionView = RelayTransactionSummary;

export type SponsorshipRequestView = {
  id: string;
  walletId: string;
  walletAddress: string;
  status: RequestStatus;
  requestedAt: string;
  approvedAt: string | null;
  rejectedAt: string | null;
  completedAt: string | null;
  failedAt: string | null;
  eligibilityReason: "eligible" | "wallet_blocked" | "already_sponsored" | "payment_refused" | null;
  /** Not part of the interface's list; shown when a server provides it. */
  failureReason?: string | null;
  relayTransactions?: RelayTransactionView[];
};

export type WalletHistoryView = {
  requests: { id: string; status: RequestStatus; requestedAt: string }[];
  nextCursor: string | null;
};

/** A refusal as the API reports it (RFC 9457), or a transport failure (`status` 0). */
export type ApiProblem = {
  status: number;
  code: string;
  title?: string;
  detail?: string;
  /** From the `Retry-After` header of a 429. */
  retryAfterSeconds?: number;
};

export type ApiResult<T> = { ok: true; status: number; data: T } | { ok: false; problem: ApiProblem };

function retryAfter(response: Response): number | undefined {
  const raw = response.headers.get("retry-after");
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Math.max(1, Number(raw.trim()));
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(1, Math.ceil((at - Date.now()) / 1000));
}

async function call<T>(path: string, init: RequestInit = {}): Promise<ApiResult<T>> {
  let response: Response;
  try {
    response = await fetch(path, { ...init, cache: "no-store", headers: { accept: "application/json", ...init.headers } });
  } catch {
    return { ok: false, problem: { status: 0, code: "network_error" } };
  }
  let body: unknown = undefined;
  try {
    body = await response.json();
  } catch {
    body = undefined;
  }
  if (response.ok && body && typeof body === "object") return { ok: true, status: response.status, data: body as T };
  const problem = body && typeof body === "object" ? (body as Record<string, unknown>) : {};
  const code =
    typeof problem.code === "string" ? problem.code : response.status >= 500 || response.ok ? "service_unavailable" : `http_${response.status}`;
  return {
    ok: false,
    problem: {
      status: response.status,
      code,
      title: typeof problem.title === "string" ? problem.title : undefined,
      detail: typeof problem.detail === "string" ? problem.detail : undefined,
      retryAfterSeconds: retryAfter(response),
    },
  };
}

function postJson<T>(path: string, body: unknown): Promise<ApiResult<T>> {
  return call<T>(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

export function registerWallet(walletAddress: string) {
  return postJson<{ id: string; walletAddress: string; isBlocked: boolean }>("/wallets/register", { walletAddress });
}

export function createSponsorshipRequest(walletAddress: string) {
  return postJson<SponsorshipRequestView>("/sponsorship/request", { walletAddress });
}

export function getSponsorshipRequest(id: string) {
  return call<SponsorshipRequestView>(`/sponsorship/${encodeURIComponent(id)}`);
}

export function getWalletHistory(walletAddress: string) {
  return call<WalletHistoryView>(`/wallets/${encodeURIComponent(walletAddress)}/history?limit=20`);
}
