import { describe, expect, it } from "vitest";
import { clientIdentity, clientNetwork, parseCidr } from "./client-identity";

describe("client identity (decisions.md, On the open internet)", () => {
  it("is the address itself for IPv4, whatever the IPv6 prefix length", () => {
    expect(clientIdentity("198.51.100.77", 64)).toBe("198.51.100.77");
    expect(clientNetwork("198.51.100.77", 64)).toBe("198.51.100.77/32");
  });

  it("groups every address of one IPv6 /64 into one identity, and tells two /64s apart", () => {
    const a = clientIdentity("2001:db8:1:2::1", 64);
    expect(a).toBe("2001:db8:1:2::/64");
    expect(clientIdentity("2001:db8:1:2:ffff:eeee:dddd:cccc", 64)).toBe(a);
    expect(clientIdentity("2001:db8:1:3::1", 64)).not.toBe(a);
  });

  it("masks inside a group for prefixes that are not a multiple of 16", () => {
    expect(clientIdentity("2001:db8:abcd:ffff::1", 56)).toBe("2001:db8:abcd:ff00::/56");
    expect(clientIdentity("2001:db8:abcd:ffff::1", 48)).toBe("2001:db8:abcd::/48");
    expect(clientIdentity("2001:0db8:ffff::1", 33)).toBe("2001:db8:8000::/33");
  });

  it("keeps the old per-address behaviour with a /128 prefix", () => {
    expect(clientIdentity("2001:db8:1:2::1", 128)).toBe("2001:db8:1:2::1");
    expect(clientNetwork("2001:db8:1:2::1", 128)).toBe("2001:db8:1:2::1/128");
  });
});

describe("CIDR text for administrator IP blocks", () => {
  it("takes an address or a prefix of either family, and clears host bits", () => {
    expect(parseCidr("198.51.100.0/24")).toBe("198.51.100.0/24");
    expect(parseCidr("198.51.100.77/24")).toBe("198.51.100.0/24");
    expect(parseCidr("198.51.100.77")).toBe("198.51.100.77/32");
    expect(parseCidr("2001:DB8:1:2::7/64")).toBe("2001:db8:1:2::/64");
    expect(parseCidr("2001:db8::1")).toBe("2001:db8::1/128");
    expect(parseCidr("10.0.0.0/8")).toBe("10.0.0.0/8");
  });

  it("refuses what is not an address or prefix, and /0", () => {
    for (const bad of [
      "",
      "not-an-ip",
      "198.51.100.0/33",
      "2001:db8::/129",
      "198.51.100.0/0",
      "::/0",
      "1.2.3",
      "1.2.3.4/",
      "1.2.3.4/-1",
      "1.2.3.4 /24",
      "::ffff:zz",
    ]) {
      expect(parseCidr(bad), bad).toBeUndefined();
    }
  });
});

describe("tunnelled IPv6 (6to4, Teredo) and IPv4-mapped ranges", () => {
  it("limits a 6to4 client as the IPv4 address inside its prefix, however many /64s its /48 holds", () => {
    expect(clientIdentity("2002:c633:644d:1::1", 64)).toBe("198.51.100.77");
    expect(clientIdentity("2002:c633:644d:ffff::abcd", 64)).toBe("198.51.100.77");
    expect(clientNetwork("2002:c633:644d:1::1", 64)).toBe("198.51.100.77/32");
  });

  it("limits a Teredo client as its (inverted) IPv4 address", () => {
    // 2001:0:4136:e378:8000:63bf:3fff:fdd2 is Teredo for client 192.0.2.45.
    expect(clientIdentity("2001:0:4136:e378:8000:63bf:3fff:fdd2", 64)).toBe("192.0.2.45");
  });

  it("reads an IPv4-mapped block as the IPv4 range it maps, and refuses one wider than the mapped space", () => {
    expect(parseCidr("::ffff:198.51.100.0/120")).toBe("198.51.100.0/24");
    expect(parseCidr("::ffff:198.51.100.7")).toBe("198.51.100.7/32");
    expect(parseCidr("::ffff:0:0/95")).toBeUndefined();
  });

  it("reads a block of a tunnel's address or prefix as the IPv4 range it carries, which its clients are matched as", () => {
    // What the dashboard shows as a request's ipAddress, blocked as it is.
    expect(parseCidr("2002:c633:644d:1::1")).toBe("198.51.100.77/32");
    expect(parseCidr("2002:c633:644d::/48")).toBe("198.51.100.77/32");
    expect(parseCidr("2002:c633:6400::/40")).toBe("198.51.100.0/24");
    expect(clientNetwork("2002:c633:644d:1::1", 64)).toBe(parseCidr("2002:c633:644d:1::1"));
    expect(parseCidr("2001:0:4136:e378:8000:63bf:3fff:fdd2")).toBe("192.0.2.45/32");
    expect(parseCidr("2001:0:4136:e378:8000:63bf:3fff:fd00/120")).toBe("192.0.2.0/24");
    expect(clientNetwork("2001:0:4136:e378:8000:63bf:3fff:fdd2", 64)).toBe(parseCidr("2001:0:4136:e378:8000:63bf:3fff:fdd2"));
    // A Teredo server's prefix covers clients of any IPv4 address; 6to4's /16 every one: refused.
    expect(parseCidr("2001:0:4136:e378::/64")).toBeUndefined();
    expect(parseCidr("2002::/16")).toBeUndefined();
    expect(parseCidr("2002:c633:644d::/200")).toBeUndefined();
    // Wider prefixes are plain IPv6 ranges (they hold other addresses than tunnels).
    expect(parseCidr("2001::/16")).toBe("2001::/16");
  });
});
