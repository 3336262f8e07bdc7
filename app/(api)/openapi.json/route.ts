import { defineRoute } from "@/lib/http/route";
import { openApiJson } from "@/lib/openapi";

/** GET /openapi.json: the OpenAPI 3.1 document generated from the handlers' zod schemas. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: () => new Response(openApiJson(), { headers: { "content-type": "application/json", "cache-control": "public, max-age=300" } }),
});
