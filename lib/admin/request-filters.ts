import { classifyRequestSearch, decodeRequestCursor, type RequestCursor, type RequestListFilters, type RequestSearch } from "@/db/queries/dashboard";
import { requestStatus, type RequestStatus } from "@/db/schema";

/** The requests table's filters, read from a query string (the dashboard page and GET /admin/requests share them). */

export const REQUEST_TIME_RANGES = {
  "1h": { label: "Last hour", ms: 3600_000 },
  "24h": { label: "Last 24 hours", ms: 24 * 3600_000 },
  "7d": { label: "Last 7 days", ms: 7 * 24 * 3600_000 },
  "30d": { label: "Last 30 days", ms: 30 * 24 * 3600_000 },
  all: { label: "Any time", ms: null },
} as const;
export type RequestTimeRange = keyof typeof REQUEST_TIME_RANGES;

export type RequestFilterQuery = {
  status: RequestStatus | "";
  range: RequestTimeRange;
  q: string;
};

export type ParsedRequestFilters = RequestListFilters & {
  query: RequestFilterQuery;
  after?: RequestCursor;
  before?: RequestCursor;
  search?: RequestSearch;
};

type Params = Record<string, string | string[] | undefined>;

function first(params: Params, name: string): string {
  const v = params[name];
  return (Array.isArray(v) ? v[0] : v)?.trim() ?? "";
}

export function searchParamsToRecord(search: URLSearchParams): Params {
  const out: Params = {};
  for (const [k, v] of search) if (out[k] === undefined) out[k] = v;
  return out;
}

export function parseRequestFilters(params: Params, now: Date = new Date()): ParsedRequestFilters {
  const statusText = first(params, "status");
  const status = (requestStatus.enumValues as readonly string[]).includes(statusText) ? (statusText as RequestStatus) : "";
  const rangeText = first(params, "range");
  // Own keys only: `"constructor" in REQUEST_TIME_RANGES` is true too.
  const range: RequestTimeRange = Object.hasOwn(REQUEST_TIME_RANGES, rangeText) ? (rangeText as RequestTimeRange) : "all";
  const q = first(params, "q").slice(0, 200);
  const ms = REQUEST_TIME_RANGES[range].ms;
  return {
    query: { status, range, q },
    statuses: status ? [status] : undefined,
    from: ms === null ? undefined : new Date(now.getTime() - ms),
    search: classifyRequestSearch(q),
    after: decodeRequestCursor(first(params, "after") || undefined),
    before: decodeRequestCursor(first(params, "before") || undefined),
  };
}

/** The query string of the table with some parameters changed (pagination links keep the filters). */
export function requestListHref(query: RequestFilterQuery, extra: { after?: string | null; before?: string | null } = {}): string {
  const p = new URLSearchParams();
  if (query.status) p.set("status", query.status);
  if (query.range !== "all") p.set("range", query.range);
  if (query.q) p.set("q", query.q);
  if (extra.after) p.set("after", extra.after);
  if (extra.before) p.set("before", extra.before);
  const s = p.toString();
  return `/dashboard/requests${s ? `?${s}` : ""}`;
}
