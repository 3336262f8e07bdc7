import { appConfig, appDb } from "@/lib/http/app-context";
import { readJsonObject } from "@/lib/http/body";
import { defineRoute, json } from "@/lib/http/route";
import { parseWalletAddressBody } from "@/lib/http/validation";
import { createSponsorshipRequest } from "@/lib/sponsorship/create-request";
import { configuredRegistryAddress } from "@/lib/sponsorship/eligibility";
import type { SponsorshipRequestResponse } from "@/lib/sponsorship/schemas";

/** POST /sponsorship/request (interface-spec 4.4): 201 created pending, 200 for a replay within the window. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: async ({ request, clientIp }) => {
    const { walletAddress } = parseWalletAddressBody(await readJsonObject(request));
    const config = appConfig();
    const { outcome, request: created } = await createSponsorshipRequest(
      appDb(),
      { walletAddress, ip: clientIp, userAgent: request.headers.get("user-agent") },
      { config, registryAddress: configuredRegistryAddress(config) },
    );
    const body = created satisfies SponsorshipRequestResponse;
    return outcome === "created" ? json(body, 201, { location: `/sponsorship/${created.id}` }) : json(body, 200);
  },
});
