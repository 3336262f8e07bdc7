import { z } from "zod";
import { isSecure, sessionSetCookie } from "@/lib/admin/http";
import { signInAdministrator } from "@/lib/admin/session";
import { readJsonObject } from "@/lib/http/body";
import { appConfig, appDb } from "@/lib/http/app-context";
import { HttpProblem, problemResponse } from "@/lib/http/problem";
import { defineRoute, json } from "@/lib/http/route";
import { storedUserAgent } from "@/lib/http/user-agent";

const body = z.strictObject({ token: z.string().min(1).max(1024) });

/** POST /admin/sign-in `{ "token": ADMIN_TOKEN }`: opens a session (HttpOnly SameSite=Strict cookie). */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: async ({ request, requestId, clientIp }) => {
    const parsed = body.safeParse(await readJsonObject(request));
    if (!parsed.success)
      throw new HttpProblem("invalid_value", 'Send { "token": "<ADMIN_TOKEN>" }', { errors: [{ path: "token", message: "must be a non-empty string" }] });
    const result = await signInAdministrator(appDb(), {
      token: parsed.data.token,
      adminToken: appConfig().adminToken,
      ipAddress: clientIp,
      ipv6PrefixLength: appConfig().ipv6PrefixLength,
      userAgent: storedUserAgent(request.headers.get("user-agent")),
    });
    switch (result.kind) {
      case "signed_in":
        return json({ sessionId: result.session.id, expiresAt: result.expiresAt.toISOString() }, 200, {
          "set-cookie": sessionSetCookie(result.secret, result.expiresAt, isSecure(request)),
        });
      case "invalid_token":
        return problemResponse("invalid_token", "The administrator token is not right", requestId);
      case "rate_limited":
        return problemResponse("rate_limited", "Too many failed sign-ins from this address; wait before trying again", requestId, {
          headers: { "retry-after": String(result.retryAfterSeconds) },
        });
      case "not_configured":
        return problemResponse("admin_not_configured", "ADMIN_TOKEN is not configured on the server", requestId);
    }
  },
});
