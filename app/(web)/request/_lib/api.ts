/**
 * The page's client for the public HTTP API: openapi-fetch typed by lib/api/types.ts, which openapi-typescript
 * generates from the document GET /openapi.json serves. The same endpoints, bodies and problem+json errors
 * external clients use (docs/api.md); nothing here is private to the web app, and a path, parameter or field the
 * document does not have is a type error here.
 */

import createClient from "openapi-fetch";
import type { components, paths } from "@/lib/api/types";
import { OPEN_REQUEST_STATUSES, TERMINAL_REQUEST_STATUSES } from "@/lib/sponsorship/status";

type Schemas = components["schemas"];

/** The API's status type (generated from the one list, lib/sponsorship/status.ts, through the OpenAPI document). */
export type RequestStatus = Schemas["RequestStatus"];
export const TERMINAL_STATUSES: readonly RequestStatus[] = TERMINAL_REQUEST_STATUSES;
export const OPEN_STATUSES: readonly RequestStatus[] = OPEN_REQUEST_STATUSES;

/** A relay attempt as GET /sponsorship/:id returns it. */
export type RelayTransactionView = Schemas["RelayTransactionSummary"];
/** GET /sponsorship/:id: the request with its wallet and relay attempts. */
export type SponsorshipRequestView = Schemas["SponsorshipRequestDetail"];
export type WalletHistoryView = Schemas["HistoryPage"];

/**
 * A refusal as the API reports it (the document's RFC 9457 `Problem`), or a transport failure (`status` 0, no body:
 * title and detail may be missing).
 */
export type ApiProblem = Pick<Schemas["Problem"], "status" | "code"> &
  Partial<Pick<Schemas["Problem"], "title" | "detail">> & {
    /** From the `Retry-After` header of a 429 or 503. */
    retryAfterSeconds?: number;
  };

export type ApiResult<T> = { ok: true; status: number; data: T } | { ok: false; problem: ApiProblem };

/** Same-origin: the page is served by the API's own server. */
const api = createClient<paths>({ cache: "no-store", headers: { accept: "application/json" } });

function retryAfter(response: Response): number | undefined {
  const raw = response.headers.get("retry-after");
  if (!raw) return undefined;
  if (/^\d+$/.test(raw.trim())) return Math.max(1, Number(raw.trim()));
  const at = Date.parse(raw);
  return Number.isNaN(at) ? undefined : Math.max(1, Math.ceil((at - Date.now()) / 1000));
}

const text = (value: unknown) => (typeof value === "string" ? value : undefined);

/** openapi-fetch's `{ data, error, response }` as the page's result; a network failure is `status` 0. */
async function settle<T>(call: () => Promise<{ data?: T; error?: unknown; response: Response }>): Promise<ApiResult<T>> {
  let result: { data?: T; error?: unknown; response: Response };
  try {
    result = await call();
  } catch {
    return { ok: false, problem: { status: 0, code: "network_error" } };
  }
  const { data, error, response } = result;
  if (response.ok && data !== undefined && typeof data === "object") return { ok: true, status: response.status, data };
  const problem = error && typeof error === "object" ? (error as Record<string, unknown>) : {};
  const code = text(problem.code) ?? (response.status >= 500 || response.ok ? "service_unavailable" : `http_${response.status}`);
  return {
    ok: false,
    problem: { status: response.status, code, title: text(problem.title), detail: text(problem.detail), retryAfterSeconds: retryAfter(response) },
  };
}

export function registerWallet(walletAddress: string) {
  return settle(() => api.POST("/wallets/register", { body: { walletAddress } }));
}

export function createSponsorshipRequest(walletAddress: string) {
  return settle(() => api.POST("/sponsorship/request", { body: { walletAddress } }));
}

export function getSponsorshipRequest(id: string) {
  return settle(() => api.GET("/sponsorship/{id}", { params: { path: { id } } }));
}

export function getWalletHistory(walletAddress: string) {
  return settle(() => api.GET("/wallets/{address}/history", { params: { path: { address: walletAddress }, query: { limit: 20 } } }));
}

/** GET /faucet: network, amount, state and the usual time to completion. */
export type FaucetStatusView = Schemas["FaucetStatus"];

export function getFaucetStatus() {
  return settle(() => api.GET("/faucet"));
}
