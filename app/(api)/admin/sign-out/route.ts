import { isSecure, sessionClearCookies } from "@/lib/admin/http";
import { requireAdmin } from "@/lib/admin/route-guard";
import { signOutAdministrator } from "@/lib/admin/session";
import { appDb } from "@/lib/http/app-context";
import { defineRoute } from "@/lib/http/route";

/** POST /admin/sign-out: ends the session and clears its cookie. */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  POST: requireAdmin(async ({ request, session, clientIp }) => {
    await signOutAdministrator(appDb(), session, { ipAddress: clientIp });
    const headers = new Headers({ "cache-control": "no-store" });
    for (const cookie of sessionClearCookies(isSecure(request))) headers.append("set-cookie", cookie);
    return new Response(null, { status: 204, headers });
  }),
});
