import { listRequests } from "@/db/queries/dashboard";
import { jsonSafe } from "@/lib/admin/http";
import { parseRequestFilters, searchParamsToRecord } from "@/lib/admin/request-filters";
import { requireAdmin } from "@/lib/admin/route-guard";
import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";

/**
 * GET /admin/requests?status=&range=1h|24h|7d|30d|all&q=<address|id|hash>&after=<cursor>&before=<cursor>&limit=:
 * the requests table, newest first, keyset-paginated (`olderCursor` / `newerCursor`).
 */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(async ({ url }) => {
    const filters = parseRequestFilters(searchParamsToRecord(url.searchParams));
    const limitText = url.searchParams.get("limit");
    const limit = limitText && /^\d{1,3}$/.test(limitText) ? Number(limitText) : 25;
    const page = await listRequests(appDb(), { ...filters, limit });
    return json(jsonSafe({ ...page, filters: filters.query }));
  }),
});
