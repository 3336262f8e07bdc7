import { faucetStatus } from "@/lib/faucet-status";
import { appConfig, appDb } from "@/lib/http/app-context";
import { defineRoute, json } from "@/lib/http/route";

/** GET /faucet (decisions.md, "Public faucet status"): served from a snapshot at most a second old. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async () => json(await faucetStatus({ db: appDb(), config: appConfig() })),
});
