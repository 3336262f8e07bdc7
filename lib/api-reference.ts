import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * The API reference page at /docs: Scalar's API reference (`@scalar/api-reference`, the browser bundle that
 * `@scalar/nextjs-api-reference` would load from a CDN) rendering GET /openapi.json.
 *
 * Served from this server, so it works offline, and with no inline script: the page is Scalar's HTML API (a
 * `<script id="api-reference" data-url>` element, which holds data and runs nothing) plus the bundle from
 * /docs/scalar.js. Under the web server's policy (lib/http/security-headers.ts: scripts by per-request nonce with
 * 'strict-dynamic') both script tags carry that nonce; served without it (no server.ts in front), the page sets
 * API_REFERENCE_CSP itself. Either way Scalar needs only `style-src 'unsafe-inline'` (it injects its styles) and
 * `connect-src 'self'`: it loads no font (withDefaultFonts: false), offers no "open in Scalar's client" button, no
 * AI agent and no share toolbar, and uses no proxy, so nothing leaves the origin (e2e/docs.spec.ts watches every
 * request).
 */

export const API_REFERENCE_BUNDLE_PATH = "/docs/scalar.js";

/** The CSP /docs is served with (and needs: see above). */
export const API_REFERENCE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const configuration = {
  withDefaultFonts: false,
  hideClientButton: true,
  // On localhost Scalar otherwise offers its AI agent (which fetches from api.scalar.com) and a toolbar that
  // uploads the document to share it: neither belongs on a self-hosted reference.
  agent: { disabled: true },
  showDeveloperTools: "never",
  showToolbar: "never",
  metaData: { title: "API reference · Gas sponsorship service" },
};

const escapeAttribute = (value: string) => value.replaceAll("&", "&amp;").replaceAll("'", "&#39;").replaceAll("<", "&lt;");

/** The nonce of a Content-Security-Policy (server.ts puts the response's policy on the request too), if any. */
export function cspNonce(policy: string | null): string | undefined {
  return policy ? /'nonce-([A-Za-z0-9+/=_-]+)'/.exec(policy)?.[1] : undefined;
}

export function apiReferenceHtml(nonce?: string): string {
  const nonceAttribute = nonce ? ` nonce="${escapeAttribute(nonce)}"` : "";
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>API reference · Gas sponsorship service</title>
  </head>
  <body>
    <noscript>The API reference needs JavaScript; the document itself is at <a href="/openapi.json">/openapi.json</a>.</noscript>
    <script id="api-reference" type="application/json"${nonceAttribute} data-url="/openapi.json" data-configuration='${escapeAttribute(JSON.stringify(configuration))}'></script>
    <script src="${API_REFERENCE_BUNDLE_PATH}"${nonceAttribute}></script>
  </body>
</html>
`;
}

let bundle: { text: string; version: string } | undefined;

/** The standalone browser bundle of the installed @scalar/api-reference, read once. */
export function apiReferenceBundle(): { text: string; version: string } {
  if (!bundle) {
    // Resolved from the project root at run time, so Next does not try to bundle a 3.5 MB browser script.
    const require = createRequire(path.join(process.cwd(), "package.json"));
    const file = require.resolve("@scalar/api-reference/browser/standalone.js");
    const manifest = path.join(path.dirname(file), "..", "..", "package.json");
    const { version } = JSON.parse(readFileSync(manifest, "utf8")) as { version: string };
    bundle = { text: readFileSync(file, "utf8"), version };
  }
  return bundle;
}
