import type { AdminSession } from "@/db/schema";
import { appConfig, appDb } from "@/lib/http/app-context";
import { CLIENT_PROTO_HEADER } from "@/lib/http/client-ip";
import { ADMIN_SESSION_COOKIE, authenticateAdminSession, SECURE_ADMIN_SESSION_COOKIE, sessionCookieName, sessionCookieNamesToClear } from "./session";

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

/**
 * The session secrets a Cookie header carries, in the order they are tried: the `__Host-admin_session` cookie (set
 * over HTTPS; nobody else can set one), then the `admin_session` ones (plain http, and sessions opened over HTTPS
 * before the cookie had the prefix).
 */
export function sessionCookieValues(header: string | null): string[] {
  return [...readCookies(header, SECURE_ADMIN_SESSION_COOKIE), ...readCookies(header, ADMIN_SESSION_COOKIE)];
}

export async function adminSessionOfRequest(request: Request): Promise<AdminSession | null> {
  return authenticateAdminSession(appDb(), sessionCookieValues(request.headers.get("cookie")), appConfig().adminToken);
}

/**
 * A Set-Cookie header value for the session cookie (HttpOnly, SameSite=Strict, Path=/; over HTTPS Secure and named
 * `__Host-admin_session`).
 */
export function sessionSetCookie(secret: string, expiresAt: Date, secure: boolean): string {
  const parts = [`${sessionCookieName(secure)}=${secret}`, "Path=/", `Expires=${expiresAt.toUTCString()}`, "HttpOnly", "SameSite=Strict"];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

/** The Set-Cookie header values that clear the session cookie (sessionCookieNamesToClear). */
export function sessionClearCookies(secure: boolean): string[] {
  return sessionCookieNamesToClear(secure).map((name) => {
    const parts = [`${name}=`, "Path=/", "Expires=Thu, 01 Jan 1970 00:00:00 GMT", "Max-Age=0", "HttpOnly", "SameSite=Strict"];
    if (secure) parts.push("Secure");
    return parts.join("; ");
  });
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
