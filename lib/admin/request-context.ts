import { headers } from "next/headers";
import { cache } from "react";
import type { AdminSession } from "@/db/schema";
import { appConfig, appDb } from "@/lib/http/app-context";
import { CLIENT_IP_HEADER, CLIENT_PROTO_HEADER, normalizeIp, UNKNOWN_IP } from "@/lib/http/client-ip";
import { storedUserAgent } from "@/lib/http/user-agent";
import { sessionCookieValues } from "./http";
import { authenticateAdminSession } from "./session";

/**
 * The administrator's request as server components and server actions see it (next/headers). Route handlers
 * use `adminSessionOfRequest` in ./http.ts instead.
 */

/** The client address server.ts resolved from the socket (`x-client-ip`), as in lib/http/client-ip.ts. */
export async function currentClientIp(): Promise<string> {
  const h = await headers();
  return normalizeIp(h.get(CLIENT_IP_HEADER)) ?? normalizeIp(h.get("x-forwarded-for")?.split(",")[0]) ?? UNKNOWN_IP;
}

export async function currentUserAgent(): Promise<string | null> {
  return storedUserAgent((await headers()).get("user-agent"));
}

/**
 * Whether the page was reached over HTTPS (a TLS socket or, with TRUST_PROXY > 0, as the trusted proxy hop says):
 * the cookie is then Secure. server.ts decides (`x-client-proto`); a client-sent X-Forwarded-Proto does not.
 */
export async function isSecureRequest(): Promise<boolean> {
  return (await headers()).get(CLIENT_PROTO_HEADER) === "https";
}

/**
 * The signed-in administrator's session, or null. Every dashboard page and action starts here; within one
 * request the lookup runs once (the layout and the page both ask).
 */
export const currentAdminSession = cache(async (): Promise<AdminSession | null> => {
  // Every cookie of the name, from the header itself: Next's cookies() keeps only the last of a name.
  const secrets = sessionCookieValues((await headers()).get("cookie"));
  return authenticateAdminSession(appDb(), secrets, appConfig().adminToken);
});
