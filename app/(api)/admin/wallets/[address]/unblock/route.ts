import { z } from "zod";
import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { unblockWalletAsAdministrator } from "@/lib/admin/wallets";
import { readJsonObject } from "@/lib/http/body";
import { appDb } from "@/lib/http/app-context";
import { HttpProblem } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";
import { parseAddressParam } from "@/lib/http/validation";

const body = z.strictObject({ reason: z.string().trim().min(1).max(1000) });

/** POST /admin/wallets/:address/unblock `{ "reason": "..." }`: lifts every active block; 200 with the lifted blocks. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: requireAdmin(async ({ request, params, session, clientIp }) => {
    const walletAddress = parseAddressParam(params.address);
    const parsed = body.safeParse(await readJsonObject(request));
    if (!parsed.success)
      throw new HttpProblem("invalid_value", "A reason of 1 to 1,000 characters is required", { errors: [{ path: "reason", message: "is required" }] });
    return json(jsonSafe(await unblockWalletAsAdministrator(appDb(), { session, ipAddress: clientIp }, { walletAddress, reason: parsed.data.reason })));
  }),
});
