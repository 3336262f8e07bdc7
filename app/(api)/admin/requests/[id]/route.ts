import { getRequestDetail } from "@/db/queries/dashboard";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { appDb } from "@/lib/http/app-context";
import { problemResponse } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";
import { parseIdParam } from "@/lib/http/validation";

/** GET /admin/requests/:id: the request with its wallet, audit trail (request_events) and every relay attempt. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(async ({ params, requestId }) => {
    const detail = await getRequestDetail(appDb(), parseIdParam(params.id));
    if (!detail) return problemResponse("request_not_found", "No sponsorship request has this id", requestId);
    // The signed raw transaction is the worker's business, not the dashboard's.
    return json(jsonSafe({ ...detail, relays: detail.relays.map(({ rawTransaction: _raw, ...relay }) => relay) }));
  }),
});
