import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseAddressParam } from "@/lib/http/validation";
import type { WalletResponse } from "@/lib/sponsorship/schemas";
import { getWallet } from "@/lib/sponsorship/wallets";

/** GET /wallets/:address (interface-spec 4.2); the address is matched in any case. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async ({ params }) => {
    const wallet = await getWallet(appDb(), parseAddressParam(params.address));
    return json(wallet satisfies WalletResponse);
  },
});
