import { z } from "zod";
import { pauseSponsorships } from "@/lib/admin/controls";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { appDb } from "@/lib/http/app-context";
import { readJsonObject } from "@/lib/http/body";
import { HttpProblem } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";

const body = z.strictObject({ reason: z.string().trim().min(1).max(1000) });

/** POST /admin/pause `{ "reason": "..." }`: no request is created and no new relay sent until resume; 200 with the state. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: requireAdmin(async ({ request, session, clientIp }) => {
    const parsed = body.safeParse(await readJsonObject(request));
    if (!parsed.success)
      throw new HttpProblem("invalid_value", 'Send { "reason": "..." } with a reason of 1 to 1,000 characters', {
        errors: [{ path: "reason", message: "is required" }],
      });
    const { state, changed } = await pauseSponsorships(appDb(), { session, ipAddress: clientIp }, { reason: parsed.data.reason });
    return json(jsonSafe({ ...state, changed }));
  }),
});
