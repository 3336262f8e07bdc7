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

export function createNonce(): string {
  return randomBytes(16).toString("base64");
}

export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** HSTS is sent only over HTTPS (RFC 6797: a browser ignores it over HTTP; sending it there would mislead). */
export const STRICT_TRANSPORT_SECURITY = "max-age=31536000";

/** The headers of a response; `https` is the scheme server.ts resolved (lib/http/client-ip.ts `resolveClientProto`). */
export function securityHeaders(input: { nonce: string; https: boolean }): Record<string, string> {
  return {
    "Content-Security-Policy": contentSecurityPolicy(input.nonce),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    ...(input.https ? { "Strict-Transport-Security": STRICT_TRANSPORT_SECURITY } : {}),
  };
}
