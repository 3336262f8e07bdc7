import type { Database } from "@/db/client";
import { signInAdministrator } from "@/lib/admin/session";

/** An administrator signed in with `token` (which is also the configured ADMIN_TOKEN), as the admin tests act. */
export async function signedInAdministrator(db: Database, token: string, ipAddress = "203.0.113.9") {
  const r = await signInAdministrator(db, { token, adminToken: token, ipAddress, userAgent: null });
  if (r.kind !== "signed_in") throw new Error(r.kind);
  return { session: r.session, ipAddress };
}
