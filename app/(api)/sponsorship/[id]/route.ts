import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseIdParam } from "@/lib/http/validation";
import { getSponsorshipRequest } from "@/lib/sponsorship/reads";
import type { SponsorshipRequestDetailResponse } from "@/lib/sponsorship/schemas";

/** GET /sponsorship/:id (interface-spec 4.5): the full record with wallet and relay attempts, one round trip. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params }) => {
    const request = await getSponsorshipRequest(appDb(), parseIdParam(params.id));
    return json(request satisfies SponsorshipRequestDetailResponse);
  },
});
