/**
 * CORS (decisions.md, "CORS"): origins listed in CORS_ORIGINS and the app's own origin are allowed; an allowed
 * origin gets `Access-Control-Allow-Origin: <origin>` and `Vary: Origin`; any other `Origin` is refused with
 * `403 origin_not_allowed` and no CORS headers. Requests without `Origin` (servers, curl) are served normally.
 */

type CorsVerdict = { kind: "no-origin" } | { kind: "allowed"; origin: string } | { kind: "denied"; origin: string };

/** Headers a browser may send cross-origin, and response headers a page may read. */
export const CORS_ALLOWED_HEADERS = "Content-Type, X-Request-Id";
export const CORS_EXPOSED_HEADERS = "X-Request-Id, Retry-After, Location";
export const CORS_MAX_AGE_SECONDS = 600;

function originOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/**
 * Whether `origin` is the app's host over plain http while the request itself came over https (`proto`, as server.ts
 * resolved it): a page that this app never served, since it is served over https, but one that anybody on the path
 * can inject into a plain-http visit of the same host (before HSTS is cached). A browser that does not keep http and
 * https of one host apart as sites sends the SameSite=Strict session cookie with its requests, so it must not count as
 * the app's own origin. With `proto` http (no TLS, or a TLS proxy that is not trusted, TRUST_PROXY=0) both schemes are.
 * One listed in `allowedOrigins` (CORS_ORIGINS, for the public API's paths) is allowed as listed.
 */
export function isDowngradedOwnOrigin(origin: string | null, host: string | null, proto: string | null, allowedOrigins: readonly string[] = []): boolean {
  if (origin === null || host === null || proto !== "https") return false;
  const normalized = originOf(origin);
  if (!normalized || allowedOrigins.includes(normalized)) return false;
  const url = new URL(normalized);
  return url.protocol === "http:" && url.host === host.trim().toLowerCase();
}

/**
 * The app's own origin is recognised by host: the page the app served was loaded from the host the browser
 * addresses (the `Host` header), whatever scheme a TLS-terminating proxy in front of it used; but over https, not
 * the same host over http (isDowngradedOwnOrigin).
 */
function corsVerdict(origin: string | null, host: string | null, allowedOrigins: readonly string[], proto: string | null): CorsVerdict {
  if (origin === null) return { kind: "no-origin" };
  const normalized = originOf(origin);
  if (!normalized) return { kind: "denied", origin };
  // The origin echoed is its serialisation (what a browser sends, and compares the answer with), never the raw text.
  if (allowedOrigins.includes(normalized)) return { kind: "allowed", origin: normalized };
  if (host && new URL(normalized).host === host.trim().toLowerCase() && !isDowngradedOwnOrigin(normalized, host, proto)) {
    return { kind: "allowed", origin: normalized };
  }
  return { kind: "denied", origin };
}

/**
 * The one CORS decision for a request, applied by the route wrapper (lib/http/route.ts) and by server.ts for what it
 * answers before Next: refuse it (`403 origin_not_allowed`), or answer it with `headers` (always `Vary: Origin`,
 * plus the CORS headers for an allowed origin). `allowedOrigin` is set for a preflight's extra headers.
 */
export type CorsCheck = { refused: boolean; headers: Record<string, string>; allowedOrigin?: string };

export function checkCors(origin: string | null, host: string | null, allowedOrigins: readonly string[], proto: string | null): CorsCheck {
  const verdict = corsVerdict(origin, host, allowedOrigins, proto);
  if (verdict.kind === "denied") return { refused: true, headers: { vary: "Origin" } };
  if (verdict.kind === "no-origin") return { refused: false, headers: { vary: "Origin" } };
  return { refused: false, headers: { ...corsHeaders(verdict.origin), vary: "Origin" }, allowedOrigin: verdict.origin };
}

/** Headers every response to an allowed cross-origin request carries. */
function corsHeaders(origin: string): Record<string, string> {
  return { "access-control-allow-origin": origin, "access-control-expose-headers": CORS_EXPOSED_HEADERS };
}

/** Extra headers of a successful preflight. */
export function preflightHeaders(origin: string, methods: readonly string[]): Record<string, string> {
  return {
    ...corsHeaders(origin),
    "access-control-allow-methods": methods.join(", "),
    "access-control-allow-headers": CORS_ALLOWED_HEADERS,
    "access-control-max-age": String(CORS_MAX_AGE_SECONDS),
  };
}
