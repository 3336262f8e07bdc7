/**
 * The one list of a sponsorship request's statuses (decisions.md, "Pipeline"). Everything else derives from it:
 * the database enum `request_status` (db/schema.ts), the zod schema the API validates and documents with
 * (lib/sponsorship/schemas.ts, hence the OpenAPI document and the client types lib/api/types.ts), and the pages.
 * Plain constants, so a client component may import it.
 */
export const REQUEST_STATUSES = ["pending", "approved", "relayed", "completed", "rejected", "failed"] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

/** Non-terminal: at most one such request per wallet (a partial unique index holds it). */
export const OPEN_REQUEST_STATUSES = ["pending", "approved", "relayed"] as const satisfies readonly RequestStatus[];
export const TERMINAL_REQUEST_STATUSES = ["completed", "rejected", "failed"] as const satisfies readonly RequestStatus[];
