import { appConfig, appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseIdParam } from "@/lib/http/validation";
import { getSponsorshipRequest } from "@/lib/sponsorship/reads";
import type { SponsorshipRequestDetailResponse } from "@/lib/sponsorship/schemas";

/**
 * GET /sponsorship/:id (interface-spec 4.5): the full record with wallet and relay attempts, one round trip; the
 * requester's IP and User-Agent only to the client it came from (lib/sponsorship/reads.ts).
 */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params, clientIp }) => {
    const reader = { ip: clientIp, ipv6PrefixLength: appConfig().ipv6PrefixLength };
    const request = await getSponsorshipRequest(appDb(), parseIdParam(params.id), reader);
    return json(request satisfies SponsorshipRequestDetailResponse);
  },
});
