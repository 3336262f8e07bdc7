import { isIP } from "node:net";
import { compressIpv6, dottedIpv4, expandIpv6, isIpv4Mapped } from "@/lib/http/client-ip";

/**
 * The client identity that every limit and block keys on (decisions.md, "On the open internet"): an IPv4 client is
 * its address; an IPv6 client is its /`prefixLength` prefix, because one host (any cheap VPS) usually holds a whole
 * /64 and would otherwise have 2^64 identities. The IP limit, the automatic IP block, the registration limit, the
 * replay window, administrator IP blocks and the sign-in limiter all use it; a request still records the full address.
 *
 * `ip` is an address as lib/http/client-ip.ts normalises it. The identity is text: the address itself for IPv4 (and
 * for IPv6 with a /128 prefix, the behaviour before prefixes), else the prefix in CIDR notation, e.g. `2001:db8:1:2::/64`.
 */
export function clientIdentity(ip: string, prefixLength: number): string {
  if (isIP(ip) !== 6) return ip;
  const tunnelled = embeddedIpv4(ip);
  if (tunnelled) return tunnelled;
  if (prefixLength >= 128) return ip;
  return clientNetwork(ip, prefixLength);
}

/**
 * The IPv4 address behind a tunnelling IPv6 address, or undefined: 6to4 (`2002:V4::/16`: one IPv4 host owns a whole
 * /48, 65,536 /64s) and Teredo (`2001:0::/32`, the client's address inverted in the last 32 bits). Such a client is
 * limited and blocked as that IPv4 address, so a tunnel neither multiplies its identities nor slips past a block of
 * its IPv4 address.
 */
export function embeddedIpv4(ip: string): string | undefined {
  const groups = expandIpv6(ip.toLowerCase());
  if (!groups) return undefined;
  if (groups[0] === 0x2002) return dottedIpv4(groups[1]!, groups[2]!);
  if (groups[0] === 0x2001 && groups[1] === 0) return dottedIpv4(groups[6]! ^ 0xffff, groups[7]! ^ 0xffff);
  return undefined;
}

/** The identity as a CIDR network (`a.b.c.d/32` for IPv4): what administrator IP blocks are matched against. */
export function clientNetwork(ip: string, prefixLength: number): string {
  const version = isIP(ip);
  if (version === 4) return `${ip}/32`;
  const tunnelled = version === 6 ? embeddedIpv4(ip) : undefined;
  if (tunnelled) return `${tunnelled}/32`;
  if (version !== 6) throw new Error(`not an IP address: ${ip}`);
  return ipv6Network(ip, prefixLength);
}

/** The /bits network of an IPv6 address in CIDR notation (host bits cleared). */
function ipv6Network(ip: string, prefixLength: number): string {
  const groups = expandIpv6(ip.toLowerCase());
  if (!groups) throw new Error(`not an IP address: ${ip}`);
  const bits = Math.min(128, Math.max(0, prefixLength));
  const masked = groups.map((group, i) => {
    const keep = Math.min(16, Math.max(0, bits - i * 16));
    return keep === 0 ? 0 : group & (0xffff << (16 - keep)) & 0xffff;
  });
  return `${compressIpv6(masked)}/${bits}`;
}

/**
 * An administrator's block target as a normalised CIDR network: an IPv4 or IPv6 address (a /32 or /128) or a prefix
 * `address/length`; host bits below the prefix are cleared (`198.51.100.77/24` is `198.51.100.0/24`). An
 * IPv4-mapped range (`::ffff:198.51.100.0/120`) is the IPv4 range it maps (clients are recorded as IPv4), and a
 * tunnel's the IPv4 range it carries (its clients are matched as that IPv4 address, clientNetwork): a 6to4
 * `2002:c633:644d::/48` is `198.51.100.77/32`, a Teredo /97 or longer the range of its inverted last 32 bits.
 * Undefined for anything else; for a /0 (it would block everyone: that is what the pause is for); for a Teredo
 * prefix of /33-/96 (it names a Teredo server, whose clients are any IPv4 address) and 6to4's whole /16.
 */
export function parseCidr(text: string): string | undefined {
  const match = /^([0-9A-Fa-f:.]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!match) return undefined;
  let address = match[1]!;
  let version = isIP(address);
  if (version === 0) return undefined;
  let length = match[2] === undefined ? (version === 4 ? 32 : 128) : Number(match[2]);
  if (length > (version === 4 ? 32 : 128)) return undefined;
  const groups = version === 6 ? expandIpv6(address.toLowerCase()) : undefined;
  const carried = groups ? embeddedIpv4(address) : undefined;
  if (groups && isIpv4Mapped(groups)) {
    if (length < 96) return undefined;
    address = dottedIpv4(groups[6]!, groups[7]!);
    length -= 96;
    version = 4;
  } else if (groups && carried) {
    // A tunnel: its clients are matched as the IPv4 address it carries (clientNetwork), 6to4's in bits 16-47,
    // Teredo's (inverted) in the last 32. A Teredo prefix shorter than /97 names a server, not clients; one shorter
    // than /32 (or than /16 for 6to4) is a plain IPv6 range that merely holds tunnel addresses.
    const [from, to, least] = groups[0] === 0x2002 ? [16, 48, 16] : [96, 128, 32];
    if (length >= least) {
      if (length <= from) return undefined;
      address = carried;
      length = Math.min(to, length) - from;
      version = 4;
    }
  }
  const max = version === 4 ? 32 : 128;
  if (!Number.isInteger(length) || length < 1 || length > max) return undefined;
  if (version === 6) return ipv6Network(address, length);
  const bits = address.split(".").reduce((n, part) => n * 256 + Number(part), 0);
  const network = length === 32 ? bits : Math.floor(bits / 2 ** (32 - length)) * 2 ** (32 - length);
  return `${[24, 16, 8, 0].map((shift) => Math.floor(network / 2 ** shift) % 256).join(".")}/${length}`;
}
