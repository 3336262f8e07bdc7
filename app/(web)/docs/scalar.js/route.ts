import { apiReferenceBundle } from "@/lib/api-reference";

/** GET /docs/scalar.js: Scalar's browser bundle, from node_modules, so /docs needs no CDN. */
export function GET(request: Request): Response {
  const { text, version } = apiReferenceBundle();
  const etag = `"scalar-api-reference-${version}"`;
  if (request.headers.get("if-none-match") === etag) return new Response(null, { status: 304, headers: { etag } });
  return new Response(text, {
    headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600", etag },
  });
}
