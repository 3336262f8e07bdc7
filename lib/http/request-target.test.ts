import { describe, expect, it } from "vitest";
import { decideTarget } from "./request-target";

const req = (url: string, { method = "GET", host = ["Host", "faucet.example"] as string[], version = [1, 1] } = {}) => ({
  url,
  method,
  rawHeaders: [...host, "Accept", "*/*"],
  httpVersionMajor: version[0]!,
  httpVersionMinor: version[1]!,
});

describe("the request target and Host as HTTP/1.1 defines them (lib/http/request-target.ts)", () => {
  it("serves an origin-form target as it is, // and : included", () => {
    for (const url of ["/health", "/request?id=1", "//a:b", "//[", "/%ZZ"]) expect(decideTarget(req(url))).toEqual({ kind: "serve", url });
  });

  it("serves an absolute-form target as its origin-form, raw, with the target's authority as the host", () => {
    expect(decideTarget(req("http://localhost:3000/health"))).toEqual({ kind: "serve", url: "/health", host: "localhost:3000" });
    expect(decideTarget(req("HTTPS://Faucet.Example/wallets/0xAB?x=%20"))).toEqual({ kind: "serve", url: "/wallets/0xAB?x=%20", host: "faucet.example" });
    expect(decideTarget(req("http://x"))).toEqual({ kind: "serve", url: "/", host: "x" });
    expect(decideTarget(req("http://x?q=1"))).toEqual({ kind: "serve", url: "/?q=1", host: "x" });
    // No Host header is needed with one (RFC 9112 §3.2.2).
    expect(decideTarget(req("http://x/health", { host: [] }))).toMatchObject({ kind: "serve", host: "x" });
  });

  it("refuses a target that is not a URL, or names a user, as 400 invalid_path", () => {
    for (const url of ["http://[::1", "http://x:99999/health", "http://user:pw@x/health", "faucet.example:443", "health", "ftp://x/"]) {
      expect([url, decideTarget(req(url))]).toEqual([url, expect.objectContaining({ kind: "invalid", code: "invalid_path" })]);
    }
  });

  it("answers OPTIONS * about the server, and any other method with * a 400", () => {
    expect(decideTarget(req("*", { method: "OPTIONS" }))).toEqual({ kind: "server-options" });
    expect(decideTarget(req("*"))).toMatchObject({ kind: "invalid", code: "invalid_path" });
  });

  it("refuses two Host headers, and an HTTP/1.1 request without one, as 400 bad_request; HTTP/1.0 needs none", () => {
    expect(decideTarget(req("/health", { host: ["Host", "a", "host", "b"] }))).toMatchObject({ kind: "invalid", code: "bad_request" });
    expect(decideTarget(req("/health", { host: [] }))).toMatchObject({ kind: "invalid", code: "bad_request" });
    expect(decideTarget(req("/health", { host: [], version: [1, 0] }))).toEqual({ kind: "serve", url: "/health" });
  });
});
