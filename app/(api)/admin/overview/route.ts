import { loadServiceOverview } from "@/lib/admin/app-overview";
import { jsonSafe } from "@/lib/admin/http";
import { parseOverviewRange } from "@/lib/admin/overview";
import { requireAdmin } from "@/lib/admin/route-guard";
import { defineRoute, json } from "@/lib/http/route";

/** GET /admin/overview?range=1h|24h|7d: what the dashboard's overview shows, as JSON (wei as decimal strings). */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(async ({ url }) => json(jsonSafe(await loadServiceOverview(parseOverviewRange(url.searchParams.get("range")))))),
});
