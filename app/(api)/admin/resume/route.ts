import { z } from "zod";
import { resumeSponsorships } from "@/lib/admin/controls";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { appDb } from "@/lib/http/app-context";
import { readOptionalJsonObject } from "@/lib/http/body";
import { HttpProblem } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";

const body = z.strictObject({ reason: z.string().trim().min(1).max(1000).optional() });

/** POST /admin/resume (an optional `{ "reason": "..." }`): sponsorships go on; 200 with the state. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: requireAdmin(async ({ request, session, clientIp }) => {
    const parsed = body.safeParse(await readOptionalJsonObject(request));
    if (!parsed.success)
      throw new HttpProblem("invalid_value", 'Send no body, or { "reason": "..." } with 1 to 1,000 characters', {
        errors: [{ path: "reason", message: "is invalid" }],
      });
    const { state, changed } = await resumeSponsorships(appDb(), { session, ipAddress: clientIp }, { reason: parsed.data.reason });
    return json(jsonSafe({ ...state, changed }));
  }),
});
