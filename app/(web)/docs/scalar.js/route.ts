import { apiReferenceBundle } from "@/lib/api-reference";
import { defineRoute } from "@/lib/http/route";

/** GET /docs/scalar.js: Scalar's browser bundle, from node_modules, so /docs needs no CDN. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: ({ request }) => {
    const { text, version } = apiReferenceBundle();
    const etag = `"scalar-api-reference-${version}"`;
    if (request.headers.get("if-none-match") === etag) return new Response(null, { status: 304, headers: { etag } });
    return new Response(text, {
      headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600", etag },
    });
  },
});
