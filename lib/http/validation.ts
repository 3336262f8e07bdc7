import type { z } from "zod";
import type { Address } from "@/lib/sponsorship/address";
import { historyQuery, transactionHashParam, uuid, walletAddressBody, walletAddressInput } from "@/lib/sponsorship/schemas";
import { HttpProblem, type FieldError } from "./problem";

/**
 * Input validation with the wire schemas of lib/sponsorship/schemas.ts, mapped onto the decisions' error table:
 * address format errors are 400 (`invalid_address`), a `walletAddress` of the wrong type is 422 (`invalid_value`),
 * unknown body fields are 422 (`unexpected_field`), bad ids and hashes are 400, bad cursor and limit are 422.
 */

function fieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  return issues.flatMap((issue) =>
    issue.code === "unrecognized_keys"
      ? issue.keys.map((key) => ({ path: key, message: "is not an allowed field" }))
      : [{ path: issue.path.map(String).join(".") || "(body)", message: issue.message }],
  );
}

/**
 * `{ walletAddress }` of the two POST endpoints, lowercased. When several things are wrong the most basic wins:
 * the address (400 missing or malformed, 422 not a string) before unexpected fields; `errors` lists them all.
 */
export function parseWalletAddressBody(body: Record<string, unknown>): { walletAddress: Address } {
  const result = walletAddressBody.safeParse(body);
  if (result.success) return { walletAddress: result.data.walletAddress.toLowerCase() as Address };
  const errors = fieldErrors(result.error.issues);
  const addressIssue = result.error.issues.find((issue) => issue.path[0] === "walletAddress");
  if (addressIssue) {
    const present = Object.hasOwn(body, "walletAddress") && body.walletAddress !== undefined;
    if (addressIssue.code === "invalid_type" && present) {
      throw new HttpProblem("invalid_value", "walletAddress must be a string", { errors });
    }
    throw new HttpProblem("invalid_address", present ? "walletAddress must be 0x followed by 40 hex characters" : "walletAddress is required", { errors });
  }
  throw new HttpProblem("unexpected_field", "Only walletAddress may be sent", { errors });
}

const single = (value: string | string[] | undefined) => (typeof value === "string" ? value : undefined);

export function parseAddressParam(value: string | string[] | undefined): Address {
  const text = single(value);
  if (text === undefined || !walletAddressInput.safeParse(text).success) {
    throw new HttpProblem("invalid_address", "The address must be 0x followed by 40 hex characters", {
      errors: [{ path: "address", message: "must match ^0x[0-9a-fA-F]{40}$" }],
    });
  }
  return text.toLowerCase() as Address;
}

/** A path id: a canonical UUID in any case, returned lowercase. */
export function parseIdParam(value: string | string[] | undefined): string {
  const text = single(value);
  if (text === undefined || !uuid.safeParse(text).success) {
    throw new HttpProblem("invalid_id", "The id must be a UUID (8-4-4-4-12 hex digits)", {
      errors: [{ path: "id", message: "must be a UUID" }],
    });
  }
  return text.toLowerCase();
}

export function parseHashParam(value: string | string[] | undefined): string {
  const text = single(value);
  if (text === undefined || !transactionHashParam.safeParse(text).success) {
    throw new HttpProblem("invalid_hash", "The transaction hash must be 1 to 1,024 characters", {
      errors: [{ path: "hash", message: "must be 1 to 1,024 characters" }],
    });
  }
  return text;
}

/** `cursor` and `limit` of the history; a parameter given more than once is invalid. */
export function parseHistoryQuery(url: URL): { cursor: string | undefined; limit: number } {
  const cursors = url.searchParams.getAll("cursor");
  const limits = url.searchParams.getAll("limit");
  const limitText = limits[0];
  const limitValue = limitText !== undefined && /^\d{1,4}$/.test(limitText) ? Number(limitText) : limitText;
  const parsed = historyQuery.safeParse({ cursor: cursors[0], limit: limitValue });
  const badLimit = limits.length > 1 || (!parsed.success && parsed.error.issues.some((i) => i.path[0] === "limit"));
  const badCursor = cursors.length > 1 || (!parsed.success && parsed.error.issues.some((i) => i.path[0] === "cursor"));
  if (badCursor) {
    throw new HttpProblem("invalid_cursor", "cursor must be the id of a request of this wallet", {
      errors: [{ path: "cursor", message: "must be a UUID" }],
    });
  }
  if (badLimit || !parsed.success) {
    throw new HttpProblem("invalid_limit", "limit must be a whole number from 1 to 100", {
      errors: [{ path: "limit", message: "must be an integer from 1 to 100" }],
    });
  }
  return { cursor: parsed.data.cursor?.toLowerCase(), limit: parsed.data.limit };
}
