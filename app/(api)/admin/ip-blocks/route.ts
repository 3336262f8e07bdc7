import { z } from "zod";
import { blockIpAsAdministrator } from "@/lib/admin/controls";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { listActiveIpBlocks } from "@/db/queries/controls";
import { appDb } from "@/lib/http/app-context";
import { readJsonObject } from "@/lib/http/body";
import { HttpProblem } from "@/lib/http/problem";
import { parseCidr } from "@/lib/sponsorship/client-identity";
import { defineRoute, json } from "@/lib/http/route";

const body = z.strictObject({ cidr: z.string().max(64), reason: z.string().trim().min(1).max(1000) });

const view = (b: { id: string; cidr: string; reason: string; createdAt: Date }) => ({
  id: b.id,
  cidr: b.cidr,
  reason: b.reason,
  createdAt: b.createdAt.toISOString(),
});

/**
 * GET /admin/ip-blocks: the active administrator IP blocks, newest first, at most 500, and `total`: how many are
 * active; `?overlapping=<address or prefix>` only those that contain it or lie within it. POST `{ "cidr", "reason" }`: 201 with
 * `{ id, cidr, reason, createdAt }` (cidr normalised, e.g. 198.51.100.0/24); a cidr that is not an address or prefix
 * is 422 invalid_value.
 */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(async ({ url }) => {
    const raw = url.searchParams.get("overlapping");
    const overlapping = raw === null ? undefined : parseCidr(raw);
    if (raw !== null && overlapping === undefined) {
      throw new HttpProblem("invalid_value", "overlapping must be an IPv4 or IPv6 address or prefix, e.g. 198.51.100.7 or 2001:db8::/48");
    }
    const { items, total } = await listActiveIpBlocks(appDb(), { overlapping });
    return json(jsonSafe({ items: items.map(view), total }));
  }),
  POST: requireAdmin(async ({ request, session, clientIp }) => {
    const parsed = body.safeParse(await readJsonObject(request));
    if (!parsed.success) {
      const errors = parsed.error.issues.map((issue) => ({ path: issue.path.join(".") || "body", message: issue.message }));
      throw new HttpProblem("invalid_value", 'Send { "cidr": "198.51.100.0/24", "reason": "..." }', { errors });
    }
    const block = await blockIpAsAdministrator(appDb(), { session, ipAddress: clientIp }, parsed.data);
    return json(view(block), 201, { location: `/admin/ip-blocks/${block.id}` });
  }),
});
