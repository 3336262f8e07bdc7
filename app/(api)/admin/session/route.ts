import { requireAdmin } from "@/lib/admin/route-guard";
import { defineRoute, json } from "@/lib/http/route";

/** GET /admin/session: the current session (401 without one). */
export const { GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS } = defineRoute({
  GET: requireAdmin(({ session }) => json({ sessionId: session.id, createdAt: session.createdAt.toISOString(), expiresAt: session.expiresAt.toISOString() })),
});
