import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseIdParam } from "@/lib/http/validation";
import { getRelayTransaction } from "@/lib/sponsorship/reads";
import type { RelayTransactionResponse } from "@/lib/sponsorship/schemas";

/** GET /relay/:id (interface-spec 4.7): the relay record, by its own id. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params }) => {
    const relay = await getRelayTransaction(appDb(), parseIdParam(params.id));
    return json(relay satisfies RelayTransactionResponse);
  },
});
