import type { Executor } from "@/db/sql/run";
import { findRelayView, type RelayView } from "@/db/queries/relay-transactions";
import {
  findHistoryAnchor,
  findRequestDetail,
  findRequestDetailByTransactionHash,
  listHistoryPage,
  type HistoryItemView,
  type RequestDetailView,
} from "@/db/queries/sponsorship-requests";
import type { Address } from "./address";
import { clientIdentity } from "./client-identity";
import { now as clockNow } from "./clock";
import { SponsorshipError } from "./errors";

/** The read side of the interface: requests, relay records and a wallet's history. */

/**
 * Who reads a request: a client by its IP address (as server.ts resolved it) and the configured IPV6_PREFIX_LENGTH,
 * or the service itself (its tests and benchmarks).
 */
export type RequestReader = { ip: string; ipv6PrefixLength: number } | "service";

/** A request as someone other than its requester reads it: the requester's IP and User-Agent withheld. */
export type PublicRequestDetailView = Omit<RequestDetailView, "ipAddress" | "userAgent"> & { ipAddress: null; userAgent: null };

/**
 * Whether `reader` is the client that made a request from `requestIp`: the same IPv4 address (a 6to4 or Teredo
 * client counts as the IPv4 address it carries), or the same IPv6 network at the limits' prefix, never wider than a
 * /64 (a configured /48 must not show the customers of one provider each other's addresses). Compared with the
 * stored address, not the limits' `client_key`, so a change of IPV6_PREFIX_LENGTH does not hide a request from its
 * requester. A client that moved (another IPv4 address, another /64, IPv4 to IPv6) is another reader.
 */
function isRequester(requestIp: string, reader: { ip: string; ipv6PrefixLength: number }): boolean {
  const prefix = Math.max(reader.ipv6PrefixLength, 64);
  return clientIdentity(requestIp, prefix) === clientIdentity(reader.ip, prefix);
}

/**
 * GET /sponsorship/:id: one round trip for the request, its wallet and its relay attempts. `ipAddress` and
 * `userAgent` are answered to the client the request came from (isRequester) and are null for anyone else
 * (decisions.md, "Privacy": nobody may link a sponsored wallet to the IP that asked for it from public data). The id
 * is not secret: `GET /sponsorship/tx/:hash` and a wallet's history, both read from public values, answer it.
 */
export async function getSponsorshipRequest(
  db: Executor,
  id: string,
  reader: RequestReader,
  now: Date = clockNow(),
): Promise<RequestDetailView | PublicRequestDetailView> {
  const request = await findRequestDetail(db, id, now);
  if (!request) throw new SponsorshipError("request_not_found", `No sponsorship request ${id}`);
  if (reader === "service" || (request.ipAddress !== null && isRequester(request.ipAddress, reader))) return request;
  return { ...request, ipAddress: null, userAgent: null };
}

// Case-insensitive as a whole (decisions.md: "Transaction hashes are matched case-insensitively"), the 0X prefix too.
const TRANSACTION_HASH = /^0x[0-9a-f]{64}$/i;

/**
 * GET /sponsorship/tx/:hash: matched case-insensitively; a string that cannot be a hash matches nothing.
 * A transaction hash is public, so the record comes without `ipAddress` and `userAgent` (null), whoever asks: nobody
 * watching the chain may link a sponsored wallet to the IP that asked for it (decisions.md, "Privacy").
 */
export async function getSponsorshipRequestByTransactionHash(db: Executor, hash: string, now: Date = clockNow()): Promise<PublicRequestDetailView> {
  const request = TRANSACTION_HASH.test(hash) ? await findRequestDetailByTransactionHash(db, hash, now) : undefined;
  if (!request) throw new SponsorshipError("request_not_found", "No sponsorship request has a relay transaction with this hash");
  return { ...request, ipAddress: null, userAgent: null };
}

/** GET /relay/:id. */
export async function getRelayTransaction(db: Executor, id: string): Promise<RelayView> {
  const relay = await findRelayView(db, id);
  if (!relay) throw new SponsorshipError("relay_not_found", `No relay transaction ${id}`);
  return relay;
}

export type HistoryPage = { requests: HistoryItemView[]; nextCursor: string | null };

/**
 * GET /wallets/:address/history: newest first (requestedAt desc, then id desc), keyset pagination. The cursor is
 * the id of the last item of the previous page and must be a request of this wallet.
 */
export async function getWalletHistory(db: Executor, walletAddress: Address, page: { cursor: string | undefined; limit: number }): Promise<HistoryPage> {
  const anchor = await findHistoryAnchor(db, walletAddress, page.cursor);
  if (!anchor) throw new SponsorshipError("wallet_not_found", `No wallet ${walletAddress} is registered`);
  if (!anchor.cursorValid) throw new SponsorshipError("invalid_cursor", "cursor is not a request of this wallet");
  const rows = await listHistoryPage(db, anchor.walletId, page.cursor, page.limit);
  const requests = rows.slice(0, page.limit);
  const nextCursor = rows.length > page.limit ? requests[requests.length - 1]!.id : null;
  return { requests, nextCursor };
}
