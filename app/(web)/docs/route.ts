import { API_REFERENCE_CSP, apiReferenceHtml, cspNonce } from "@/lib/api-reference";
import { defineRoute } from "@/lib/http/route";

/** GET /docs: the API reference page (lib/api-reference.ts), under the web server's CSP nonce when there is one. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: ({ request }) => {
    const nonce = cspNonce(request.headers.get("content-security-policy"));
    const headers: Record<string, string> = { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" };
    if (!nonce) headers["content-security-policy"] = API_REFERENCE_CSP;
    return new Response(apiReferenceHtml(nonce), { headers });
  },
});
