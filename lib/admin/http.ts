import type { AdminSession } from "@/db/schema";
import { appConfig, appDb } from "@/lib/http/app-context";
import { CLIENT_PROTO_HEADER } from "@/lib/http/client-ip";
import { ADMIN_SESSION_COOKIE, authenticateAdminSession } from "./session";

/**
 * The admin JSON routes' plumbing. Their refusals are rendered by lib/http/problem.ts like the public API's; the
 * codes that exist only under /admin are its ADMIN_PROBLEMS.
 */

/** The values of every cookie of this name in a Cookie header, in its order (a browser sends longer paths first). */
export function readCookies(header: string | null, name: string): string[] {
  const values: string[] = [];
  if (!header) return values;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() !== name) continue;
    try {
      values.push(decodeURIComponent(part.slice(eq + 1).trim()));
    } catch {
      // A malformed percent-escape is no session (and must not be a 500).
    }
  }
  return values;
}

/** The value of one cookie in a Cookie header (the first of its name). */
export function readCookie(header: string | null, name: string): string | undefined {
  return readCookies(header, name)[0];
}

export async function adminSessionOfRequest(request: Request): Promise<AdminSession | null> {
  return authenticateAdminSession(appDb(), readCookies(request.headers.get("cookie"), ADMIN_SESSION_COOKIE), appConfig().adminToken);
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
