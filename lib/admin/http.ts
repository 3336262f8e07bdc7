import type { AdminSession } from "@/db/schema";
import { appDb } from "@/lib/http/app-context";
import { CLIENT_PROTO_HEADER } from "@/lib/http/client-ip";
import { ADMIN_SESSION_COOKIE, authenticateAdminSession } from "./session";

/**
 * The admin JSON routes' plumbing. Their refusals are RFC 9457 problem details in the same shape as the public
 * API's (lib/http/problem.ts); the codes below exist only under /admin.
 */

export const ADMIN_PROBLEMS = {
  unauthorized: { status: 401, title: "Sign-in required" },
  invalid_token: { status: 401, title: "Wrong administrator token" },
  ip_block_not_found: { status: 404, title: "IP block not found" },
  admin_not_configured: { status: 503, title: "Administration is not configured" },
} as const;
export type AdminProblemCode = keyof typeof ADMIN_PROBLEMS;

export function adminProblem(code: AdminProblemCode, detail: string, requestId: string, headers: Record<string, string> = {}): Response {
  const { status, title } = ADMIN_PROBLEMS[code];
  const body = { type: `urn:problem-type:gas-sponsorship:${code}`, title, status, detail, code, requestId };
  const extra: Record<string, string> = code === "unauthorized" ? { "www-authenticate": 'Cookie realm="dashboard"' } : {};
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/problem+json", "cache-control": "no-store", ...extra, ...headers },
  });
}

/** The value of one cookie in a Cookie header. */
export function readCookie(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      // A malformed percent-escape is no session (and must not be a 500).
      return undefined;
    }
  }
  return undefined;
}

export async function adminSessionOfRequest(request: Request): Promise<AdminSession | null> {
  return authenticateAdminSession(appDb(), readCookie(request.headers.get("cookie"), ADMIN_SESSION_COOKIE));
}

/** A Set-Cookie header value for the session cookie (HttpOnly, SameSite=Strict, Path=/, Secure over HTTPS). */
export function sessionSetCookie(secret: string, expiresAt: Date, secure: boolean): string {
  const parts = [`${ADMIN_SESSION_COOKIE}=${secret}`, "Path=/", `Expires=${expiresAt.toUTCString()}`, "HttpOnly", "SameSite=Strict"];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

export function sessionClearCookie(secure: boolean): string {
  const parts = [`${ADMIN_SESSION_COOKIE}=`, "Path=/", "Expires=Thu, 01 Jan 1970 00:00:00 GMT", "Max-Age=0", "HttpOnly", "SameSite=Strict"];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

/**
 * Whether the session cookie gets `Secure`: only from what server.ts established (a TLS socket, or a trusted proxy
 * hop's X-Forwarded-Proto; lib/http/client-ip.ts `resolveClientProto`), never from a header the client sent.
 */
export function isSecure(request: Request): boolean {
  return request.headers.get(CLIENT_PROTO_HEADER) === "https";
}

/** A value made JSON-safe: bigints (wei, gas) as decimal strings; Dates stay (JSON renders them ISO 8601). */
export function jsonSafe<T>(value: T): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v) => (typeof v === "bigint" ? v.toString() : v)));
}
