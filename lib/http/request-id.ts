import { randomUUID } from "node:crypto";

/**
 * `X-Request-Id` (decisions.md, "Wire format"): a client-sent value of 1-128 characters of `[A-Za-z0-9._-]` is
 * echoed, otherwise a new one is generated. server.ts settles it before Next sees the request, so the route
 * handlers, the logs and every response (Next's own included) carry the same id.
 */
export const REQUEST_ID_HEADER = "x-request-id";
const VALID = /^[A-Za-z0-9._-]{1,128}$/;

export function acceptedRequestId(value: string | null | undefined): string | undefined {
  return typeof value === "string" && VALID.test(value) ? value : undefined;
}

export function requestIdFor(value: string | null | undefined): string {
  return acceptedRequestId(value) ?? randomUUID();
}
