import type { AdminSession } from "@/db/schema";
import type { Handler, HandlerInput } from "@/lib/http/route";
import { problemResponse } from "@/lib/http/problem";
import { adminSessionOfRequest } from "./http";

export type AdminHandlerInput = HandlerInput & { session: AdminSession };

/** An admin route handler: 401 problem+json unless the request carries a live administrator session. */
export function requireAdmin(handler: (input: AdminHandlerInput) => Promise<Response> | Response): Handler {
  return async (input) => {
    const session = await adminSessionOfRequest(input.request);
    if (!session) return problemResponse("unauthorized", "Sign in with the administrator token first (POST /admin/sign-in or /dashboard)", input.requestId);
    return handler({ ...input, session });
  };
}
