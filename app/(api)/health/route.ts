import { checkHealth } from "@/lib/health";
import { appConfig, appDb } from "@/lib/http/app-context";
import { defineRoute, json, UNAVAILABLE_RETRY_AFTER_SECONDS } from "@/lib/http/route";

/** GET /health (interface-spec 4.8, decisions.md "Reads"): 200 ok/degraded, 503 unavailable without a database. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: async () => {
    const { httpStatus, body } = await checkHealth({ db: appDb(), config: appConfig() });
    return json(body, httpStatus, httpStatus === 503 ? { "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS) } : {});
  },
});
