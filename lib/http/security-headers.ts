import { randomBytes } from "node:crypto";

/**
 * Security headers of every response of the web server (issue 11, item 8), set by server.ts before Next runs.
 *
 * The Content-Security-Policy allows scripts only with a per-request nonce ('strict-dynamic' lets the scripts so
 * trusted load Next's chunks): Next reads the nonce from the request's own `Content-Security-Policy` header and puts
 * it on every script it renders, which is why server.ts sets the policy on the request as well as the response, and
 * why the pages render per request (app/layout.tsx). Styles allow 'unsafe-inline' (React style attributes and
 * Next's inline style tags; styles cannot run code). The /request page talks only to this origin (wagmi reads no
 * chain: app/(web)/_lib/wagmi.ts), so `connect-src 'self'`. `frame-ancestors 'none'`: no page may be framed.
 */

/** A nonce is 16 random bytes (128 bits, base64): CSP3 asks for at least 128 bits. */
const NONCE_BYTES = 16;
/**
 * Nonces are cut from a buffer of 256 filled at once by the same CSPRNG (one randomBytes call per 256 requests
 * instead of one per request, as Node's own randomUUID caches its entropy): every byte is used once, so each nonce
 * is as unpredictable as a fresh randomBytes(16). Measured in `npm run bench` (docs/performance.md, "Trees side by
 * side"): randomFillSync was 1.2% of the web server's busy time under GET /health.
 */
const NONCE_POOL_BYTES = NONCE_BYTES * 256;
let noncePool = Buffer.alloc(0);
let noncePoolOffset = 0;

export function createNonce(): string {
  if (noncePoolOffset + NONCE_BYTES > noncePool.length) {
    noncePool = randomBytes(NONCE_POOL_BYTES);
    noncePoolOffset = 0;
  }
  const nonce = noncePool.toString("base64", noncePoolOffset, noncePoolOffset + NONCE_BYTES);
  noncePoolOffset += NONCE_BYTES;
  return nonce;
}

const CSP_DIRECTIVES = [
  "default-src 'self'",
  "script-src 'self' 'nonce-{nonce}' 'strict-dynamic'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");
// The policy's text around the nonce, joined once: a request only concatenates three strings.
const [CSP_BEFORE_NONCE, CSP_AFTER_NONCE] = CSP_DIRECTIVES.split("{nonce}") as [string, string];

export function contentSecurityPolicy(nonce: string): string {
  return CSP_BEFORE_NONCE + nonce + CSP_AFTER_NONCE;
}

/** HSTS is sent only over HTTPS (RFC 6797: a browser ignores it over HTTP; sending it there would mislead). */
export const STRICT_TRANSPORT_SECURITY = "max-age=31536000";

/** The headers that are the same on every response. */
export const STATIC_HEADERS: readonly (readonly [string, string])[] = [
  ["X-Content-Type-Options", "nosniff"],
  ["Referrer-Policy", "no-referrer"],
  ["X-Frame-Options", "DENY"],
];

/** The headers of a response; `https` is the scheme server.ts resolved (lib/http/client-ip.ts `resolveClientProto`). */
export function securityHeaders(input: { nonce: string; https: boolean }): Record<string, string> {
  return {
    "Content-Security-Policy": contentSecurityPolicy(input.nonce),
    ...Object.fromEntries(STATIC_HEADERS),
    ...(input.https ? { "Strict-Transport-Security": STRICT_TRANSPORT_SECURITY } : {}),
  };
}

/**
 * server.ts's per-request step: a fresh nonce, the policy on the request (Next reads the nonce from it; the client's
 * own header is replaced) and every security header on the response, without building an object per request.
 */
export function applySecurityHeaders(
  req: { headers: Record<string, string | string[] | undefined> },
  res: { setHeader(name: string, value: string): unknown },
  https: boolean,
): void {
  const policy = contentSecurityPolicy(createNonce());
  req.headers["content-security-policy"] = policy;
  res.setHeader("Content-Security-Policy", policy);
  for (const [name, value] of STATIC_HEADERS) res.setHeader(name, value);
  if (https) res.setHeader("Strict-Transport-Security", STRICT_TRANSPORT_SECURITY);
}
