import { isIP } from "node:net";

/**
 * The client's IP address (decisions.md, "Client IP"). By default it is the TCP peer of the connection;
 * `X-Forwarded-For` is believed only when the operator declares `TRUST_PROXY=N` proxy hops, and then the N-th
 * entry from the right is the client (each trusted proxy appended the address it saw). A client that talks to the
 * server directly therefore cannot pick its own rate-limit identity with a forged header.
 *
 * server.ts resolves the address from the socket (route handlers cannot see it) and hands it to the route
 * handlers in the `x-client-ip` header, after deleting any incoming header of that name.
 */

/** The request header through which server.ts hands the resolved address to route handlers. */
export const CLIENT_IP_HEADER = "x-client-ip";

/**
 * An address as the service records it: IPv4 dotted, IPv6 lowercase; IPv4-mapped IPv6 (`::ffff:127.0.0.1`)
 * becomes IPv4; brackets, ports and IPv6 zone ids are dropped. `undefined` when the text is not an IP address.
 */
export function normalizeIp(input: string | undefined | null): string | undefined {
  if (!input) return undefined;
  let value = input.trim();
  if (value === "") return undefined;
  // "[v6]:port" or "[v6]"
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(value);
  if (bracketed) value = bracketed[1]!;
  // "v4:port"
  else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d+$/.test(value)) value = value.slice(0, value.lastIndexOf(":"));
  // The common case first: a socket of a dual-stack server reports IPv4 peers as "::ffff:a.b.c.d".
  if (value.startsWith("::ffff:") && isIP(value.slice(7)) === 4) return value.slice(7);
  const zone = value.indexOf("%");
  if (zone !== -1) value = value.slice(0, zone);
  const version = isIP(value);
  if (version === 4) return value;
  if (version !== 6) return undefined;
  value = value.toLowerCase();
  const groups = expandIpv6(value);
  if (groups && isIpv4Mapped(groups)) return dottedIpv4(groups[6]!, groups[7]!);
  return groups ? compressIpv6(groups) : value;
}

/** IPv4-mapped (::ffff:a.b.c.d): five zero groups, then ffff, then the IPv4 address. */
export function isIpv4Mapped(groups: readonly number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
}

/** Two 16-bit groups as the dotted IPv4 address they carry. */
export function dottedIpv4(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** RFC 5952 text: lowercase, no leading zeros, the longest run (>= 2) of zero groups as "::"; the IPv4 tail of a mapped or compatible address dotted, as PostgreSQL prints it. */
export function compressIpv6(groups: number[]): string {
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  // As PostgreSQL prints inet and cidr (and BIND before it): an IPv4-compatible address (96 zero bits, then a
  // non-zero seventh group) and an IPv4-mapped one end in dotted IPv4, so a value the database hands back reads the same.
  if (bestStart === 0 && bestLength === 6) return `::${dottedIpv4(groups[6]!, groups[7]!)}`;
  if (isIpv4Mapped(groups)) return `::ffff:${dottedIpv4(groups[6]!, groups[7]!)}`;
  const hex = groups.map((g) => g.toString(16));
  if (bestLength < 2) return hex.join(":");
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`;
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail counts as two groups); undefined if invalid. */
export function expandIpv6(value: string): number[] | undefined {
  let text = value;
  const v4 = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail, ...rest] = text.split("::");
  if (rest.length > 0 || head === undefined) return undefined;
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const missing = 8 - left.length - right.length;
  if (tail === undefined ? missing !== 0 : missing < 1) return undefined;
  const all = [...left, ...Array<string>(tail === undefined ? 0 : missing).fill("0"), ...right];
  const groups = all.map((g) => parseInt(g, 16));
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined;
}

export type ClientIpInput = {
  /** The socket's remote address (`req.socket.remoteAddress`). */
  peerAddress: string | undefined;
  /** Every `X-Forwarded-For` header value as received (node joins repeated headers with ", "). */
  forwardedFor: string | readonly string[] | undefined;
  /** TRUST_PROXY: how many proxies in front of the server are trusted to append to `X-Forwarded-For`. */
  trustProxy: number;
};

/** The address used when the socket has none (it was already closed): never a value a client can choose. */
export const UNKNOWN_IP = "0.0.0.0";

/**
 * Pure: the client address for a connection. With `trustProxy = 0` the peer address, whatever the headers say.
 * With N > 0 the chain is [peer, ...X-Forwarded-For from right to left]; the N trusted hops are skipped and the
 * next address is the client (when the list is shorter, its leftmost entry). An entry that is not an IP address
 * stops the walk: the last address known to be good is used.
 */
export function resolveClientIp({ peerAddress, forwardedFor, trustProxy }: ClientIpInput): string {
  const peer = normalizeIp(peerAddress) ?? UNKNOWN_IP;
  if (trustProxy <= 0 || forwardedFor === undefined) return peer;
  const raw = typeof forwardedFor === "string" ? [forwardedFor] : forwardedFor;
  const entries = raw
    .flatMap((value) => value.split(","))
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  let client = peer;
  for (let hop = 0; hop < trustProxy && entries.length > 0; hop++) {
    const next = normalizeIp(entries.pop());
    if (!next) break;
    client = next;
  }
  return client;
}

/**
 * The client address of a request reaching a route handler: the `x-client-ip` header that server.ts set. Without
 * it (a request built by a test, or `next dev` without server.ts) the left-most `x-forwarded-for` entry that
 * Next's own server fills from the socket, else UNKNOWN_IP.
 */
export function clientIpOf(request: Request): string {
  const fromServer = normalizeIp(request.headers.get(CLIENT_IP_HEADER));
  if (fromServer) return fromServer;
  const forwarded = request.headers.get("x-forwarded-for");
  return normalizeIp(forwarded?.split(",")[0]) ?? UNKNOWN_IP;
}

/** The request header through which server.ts hands the resolved scheme (`https` or `http`) to the handlers. */
export const CLIENT_PROTO_HEADER = "x-client-proto";

/**
 * Pure: the scheme the client used (issue 11, item 8). `https` when the connection itself is TLS. Otherwise only a
 * trusted proxy may say so (TRUST_PROXY=N > 0): `X-Forwarded-Proto`'s N-th entry from the right, as for
 * X-Forwarded-For (its left-most entry when the list is shorter). With TRUST_PROXY=0 a client-sent header is ignored.
 */
export function resolveClientProto(input: {
  encrypted: boolean;
  forwardedProto: string | readonly string[] | undefined;
  trustProxy: number;
}): "https" | "http" {
  if (input.encrypted) return "https";
  return trustedHopEntry(input.forwardedProto, input.trustProxy) === "https" ? "https" : "http";
}

/**
 * A forwarded header's entry that the trusted hop wrote (TRUST_PROXY=N > 0): its N-th entry from the right, lowercase,
 * over every line of the header (its left-most when the list is shorter); undefined with TRUST_PROXY=0, without the
 * header, or with no entry in it.
 */
function trustedHopEntry(header: string | readonly string[] | undefined, trustProxy: number): string | undefined {
  if (trustProxy <= 0 || header === undefined) return undefined;
  const entries = (typeof header === "string" ? [header] : header)
    .flatMap((value) => value.split(","))
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== "");
  return entries.length === 0 ? undefined : entries[Math.max(0, entries.length - trustProxy)];
}

/**
 * Pure: the host the client addressed when a trusted proxy rewrote `Host` (TRUST_PROXY=N > 0): `X-Forwarded-Host`'s
 * N-th entry from the right, as for X-Forwarded-For; undefined without one, and always with TRUST_PROXY=0 (a
 * client-sent header is not believed). server.ts replaces the header with this value or deletes it, so the app's own
 * origin is judged by one host everywhere: the route handlers' CORS and admin checks and Next's server actions
 * (which compare `Origin` with `X-Forwarded-Host`, else `Host`).
 */
export function resolveForwardedHost(input: { forwardedHost: string | readonly string[] | undefined; trustProxy: number }): string | undefined {
  return trustedHopEntry(input.forwardedHost, input.trustProxy);
}

/** The host the request addressed, for the app's own origin: a trusted X-Forwarded-Host (server.ts), else Host. */
export function requestHost(get: (name: string) => string | null | undefined): string | null {
  return get("x-forwarded-host") ?? get("host") ?? null;
}
