import { unblockIpAsAdministrator } from "@/lib/admin/controls";
import { problemResponse } from "@/lib/http/problem";
import { requireAdmin } from "@/lib/admin/route-guard";
import { appDb } from "@/lib/http/app-context";
import { defineRoute } from "@/lib/http/route";
import { parseIdParam } from "@/lib/http/validation";

/** DELETE /admin/ip-blocks/:id: lifts the block (204); 404 ip_block_not_found when no active block has that id. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  DELETE: requireAdmin(async ({ params, session, clientIp, requestId }) => {
    const id = parseIdParam(params.id);
    const lifted = await unblockIpAsAdministrator(appDb(), { session, ipAddress: clientIp }, { id });
    if (!lifted) return problemResponse("ip_block_not_found", `No active IP block has the id ${id}`, requestId);
    return new Response(null, { status: 204, headers: { "cache-control": "no-store" } });
  }),
});
