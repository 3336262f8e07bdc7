import { jsonSafe } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { lookUpWallet } from "@/lib/admin/wallets";
import { appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";
import { parseAddressParam } from "@/lib/http/validation";

/** GET /admin/wallets/:address: the wallet (or null when unregistered), its blocks, history and audit. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(async ({ params }) => json(jsonSafe(await lookUpWallet(appDb(), parseAddressParam(params.address))))),
});
