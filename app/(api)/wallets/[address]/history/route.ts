import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseAddressParam, parseHistoryQuery } from "@/lib/http/validation";
import { getWalletHistory } from "@/lib/sponsorship/reads";
import type { HistoryResponse } from "@/lib/sponsorship/schemas";

/** GET /wallets/:address/history?cursor&limit (interface-spec 4.3): newest first, keyset pagination. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params, url }) => {
    const address = parseAddressParam(params.address);
    const page = await getWalletHistory(appDb(), address, parseHistoryQuery(url));
    return json(page satisfies HistoryResponse);
  },
});
