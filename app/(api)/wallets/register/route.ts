import { appConfig, appDb } from "@/lib/http/app-context";
import { readJsonObject } from "@/lib/http/body";
import { defineRoute, json } from "@/lib/http/route";
import { parseWalletAddressBody } from "@/lib/http/validation";
import type { WalletResponse } from "@/lib/sponsorship/schemas";
import { registerWallet } from "@/lib/sponsorship/wallets";

/** POST /wallets/register (interface-spec 4.1): 201 when new, 200 when already registered. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: async ({ request, clientIp }) => {
    const { walletAddress } = parseWalletAddressBody(await readJsonObject(request));
    const { wallet, created } = await registerWallet(appDb(), { walletAddress, ip: clientIp }, { config: appConfig() });
    return json(wallet satisfies WalletResponse, created ? 201 : 200, created ? { location: `/wallets/${wallet.walletAddress}` } : {});
  },
});
