import { API_REFERENCE_CSP, apiReferenceHtml } from "@/lib/api-reference";

/** GET /docs: the API reference page (lib/api-reference.ts). */
export function GET(): Response {
  return new Response(apiReferenceHtml(), {
    headers: { "content-type": "text/html; charset=utf-8", "content-security-policy": API_REFERENCE_CSP, "cache-control": "no-cache" },
  });
}
