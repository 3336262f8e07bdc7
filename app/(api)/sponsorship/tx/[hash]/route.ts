import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseHashParam } from "@/lib/http/validation";
import { getSponsorshipRequestByTransactionHash } from "@/lib/sponsorship/reads";
import type { SponsorshipRequestByTransactionResponse } from "@/lib/sponsorship/schemas";

/**
 * GET /sponsorship/tx/:hash (interface-spec 4.6): the request owning the relay transaction, same shape as 4.5 but
 * with ipAddress and userAgent null (decisions.md, "Privacy": a transaction hash is public).
 */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params }) => {
    const request = await getSponsorshipRequestByTransactionHash(appDb(), parseHashParam(params.hash));
    return json(request satisfies SponsorshipRequestByTransactionResponse);
  },
});
