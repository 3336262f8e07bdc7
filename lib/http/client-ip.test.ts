import { describe, expect, it } from "vitest";
import { CLIENT_IP_HEADER, clientIpOf, normalizeIp, requestHost, resolveClientIp, resolveClientProto, resolveForwardedHost } from "./client-ip";

describe("client IP", () => {
  it("uses the TCP peer and ignores X-Forwarded-For when TRUST_PROXY is 0", () => {
    expect(resolveClientIp({ peerAddress: "203.0.113.7", forwardedFor: "1.2.3.4", trustProxy: 0 })).toBe("203.0.113.7");
    expect(resolveClientIp({ peerAddress: "203.0.113.7", forwardedFor: ["1.2.3.4", "5.6.7.8"], trustProxy: 0 })).toBe("203.0.113.7");
  });

  it("reports an IPv4-mapped IPv6 peer as IPv4", () => {
    expect(resolveClientIp({ peerAddress: "::ffff:127.0.0.1", forwardedFor: undefined, trustProxy: 0 })).toBe("127.0.0.1");
    expect(normalizeIp("0:0:0:0:0:ffff:7f00:1")).toBe("127.0.0.1");
    expect(normalizeIp("::FFFF:10.0.0.1")).toBe("10.0.0.1");
  });

  it("with TRUST_PROXY=1 takes the right-most X-Forwarded-For entry (the one the proxy appended)", () => {
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: "6.6.6.6, 198.51.100.9", trustProxy: 1 })).toBe("198.51.100.9");
  });

  it("with TRUST_PROXY=N takes the N-th entry from the right, across repeated headers", () => {
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: ["6.6.6.6, 198.51.100.9", "10.0.0.2"], trustProxy: 2 })).toBe("198.51.100.9");
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: "1.1.1.1, 2.2.2.2, 3.3.3.3", trustProxy: 3 })).toBe("1.1.1.1");
  });

  it("uses the left-most entry when the chain is shorter than the trusted hops, the peer when there is no header", () => {
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: "198.51.100.9", trustProxy: 3 })).toBe("198.51.100.9");
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: undefined, trustProxy: 1 })).toBe("10.0.0.1");
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: " , ", trustProxy: 1 })).toBe("10.0.0.1");
  });

  it("never lets a malformed entry become the client address", () => {
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: "hello", trustProxy: 1 })).toBe("10.0.0.1");
    expect(resolveClientIp({ peerAddress: "10.0.0.1", forwardedFor: "1.1.1.1, <script>", trustProxy: 2 })).toBe("10.0.0.1");
  });

  it("drops ports, brackets and zone ids and writes IPv6 in its canonical form", () => {
    expect(normalizeIp("198.51.100.9:4711")).toBe("198.51.100.9");
    expect(normalizeIp("[2001:DB8::1]:443")).toBe("2001:db8::1");
    expect(normalizeIp("2001:0db8:0000:0000:0000:0000:0000:0001")).toBe("2001:db8::1");
    expect(normalizeIp("fe80::1%eth0")).toBe("fe80::1");
    expect(normalizeIp("::1")).toBe("::1");
    expect(normalizeIp("not an ip")).toBeUndefined();
    expect(normalizeIp("")).toBeUndefined();
  });

  it("reads the address server.ts handed over in x-client-ip", () => {
    const request = new Request("http://localhost/health", { headers: { [CLIENT_IP_HEADER]: "::ffff:192.0.2.1", "x-forwarded-for": "6.6.6.6" } });
    expect(clientIpOf(request)).toBe("192.0.2.1");
    expect(clientIpOf(new Request("http://localhost/health"))).toBe("0.0.0.0");
  });
});

describe("client scheme (issue 11, item 8)", () => {
  it("is https only from a TLS socket when TRUST_PROXY=0, whatever X-Forwarded-Proto says", () => {
    expect(resolveClientProto({ encrypted: false, forwardedProto: "https", trustProxy: 0 })).toBe("http");
    expect(resolveClientProto({ encrypted: true, forwardedProto: undefined, trustProxy: 0 })).toBe("https");
    expect(resolveClientProto({ encrypted: true, forwardedProto: "http", trustProxy: 0 })).toBe("https");
  });

  it("believes the trusted hop's X-Forwarded-Proto entry (the N-th from the right) with TRUST_PROXY=N", () => {
    expect(resolveClientProto({ encrypted: false, forwardedProto: "https", trustProxy: 1 })).toBe("https");
    expect(resolveClientProto({ encrypted: false, forwardedProto: "HTTPS", trustProxy: 1 })).toBe("https");
    // A client prepends "https"; the one trusted proxy appended what it saw: http.
    expect(resolveClientProto({ encrypted: false, forwardedProto: "https, http", trustProxy: 1 })).toBe("http");
    expect(resolveClientProto({ encrypted: false, forwardedProto: "https, http", trustProxy: 2 })).toBe("https");
    expect(resolveClientProto({ encrypted: false, forwardedProto: ["https"], trustProxy: 3 })).toBe("https");
    expect(resolveClientProto({ encrypted: false, forwardedProto: "", trustProxy: 1 })).toBe("http");
    expect(resolveClientProto({ encrypted: false, forwardedProto: undefined, trustProxy: 1 })).toBe("http");
  });
});

describe("the host the client addressed (X-Forwarded-Host, only from a trusted proxy)", () => {
  it("believes the trusted hop's entry with TRUST_PROXY=N, nothing a client sends with TRUST_PROXY=0", () => {
    expect(resolveForwardedHost({ forwardedHost: "faucet.example", trustProxy: 0 })).toBeUndefined();
    expect(resolveForwardedHost({ forwardedHost: "Faucet.Example", trustProxy: 1 })).toBe("faucet.example");
    expect(resolveForwardedHost({ forwardedHost: "forged.example, faucet.example", trustProxy: 1 })).toBe("faucet.example");
    expect(resolveForwardedHost({ forwardedHost: ["forged.example", "cdn.example, faucet.example"], trustProxy: 2 })).toBe("cdn.example");
    expect(resolveForwardedHost({ forwardedHost: " , ", trustProxy: 1 })).toBeUndefined();
    expect(resolveForwardedHost({ forwardedHost: undefined, trustProxy: 1 })).toBeUndefined();
  });

  it("judges the app's own origin by that host when server.ts kept one, else by Host", () => {
    const headers = (h: Record<string, string>) => (name: string) => h[name] ?? null;
    expect(requestHost(headers({ host: "127.0.0.1:3000", "x-forwarded-host": "faucet.example" }))).toBe("faucet.example");
    expect(requestHost(headers({ host: "faucet.example" }))).toBe("faucet.example");
    expect(requestHost(headers({}))).toBeNull();
  });
});
