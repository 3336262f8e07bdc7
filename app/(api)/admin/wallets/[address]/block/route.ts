import { z } from "zod";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { blockWalletAsAdministrator } from "@/lib/admin/wallets";
import { readJsonObject } from "@/lib/http/body";
import { appDb } from "@/lib/http/app-context";
import { HttpProblem } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";
import { parseAddressParam } from "@/lib/http/validation";

const body = z.strictObject({ reason: z.string().trim().min(1).max(1000) });

/** POST /admin/wallets/:address/block `{ "reason": "..." }`: 201 with the new block, 200 when already blocked. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: requireAdmin(async ({ request, params, session, clientIp }) => {
    const walletAddress = parseAddressParam(params.address);
    const parsed = body.safeParse(await readJsonObject(request));
    if (!parsed.success)
      throw new HttpProblem("invalid_value", "A reason of 1 to 1,000 characters is required", { errors: [{ path: "reason", message: "is required" }] });
    const result = await blockWalletAsAdministrator(appDb(), { session, ipAddress: clientIp }, { walletAddress, reason: parsed.data.reason });
    return json(jsonSafe(result), result.created ? 201 : 200);
  }),
});
