import { describe, expect, it } from "vitest";
import { applySecurityHeaders, contentSecurityPolicy, createNonce, securityHeaders, STRICT_TRANSPORT_SECURITY } from "./security-headers";

const POLICY_AROUND = (nonce: string) =>
  `default-src 'self'; script-src 'self' 'nonce-${nonce}' 'strict-dynamic'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; ` +
  "font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

describe("security headers (issue 11, item 8)", () => {
  it("gives every request its own 128-bit nonce, also across refills of the nonce pool", () => {
    const nonces = Array.from({ length: 2_000 }, () => createNonce());
    expect(new Set(nonces).size).toBe(nonces.length);
    for (const nonce of nonces) expect(Buffer.from(nonce, "base64")).toHaveLength(16);
  });

  it("puts the nonce into the policy's script-src and keeps every other directive, frame-ancestors 'none' included", () => {
    expect(contentSecurityPolicy("abc+/=")).toBe(POLICY_AROUND("abc+/="));
    expect(securityHeaders({ nonce: "n", https: false })).toEqual({
      "Content-Security-Policy": POLICY_AROUND("n"),
      "X-Content-Type-Options": "nosniff",
      "Referrer-Policy": "no-referrer",
      "X-Frame-Options": "DENY",
    });
  });

  it("sets the same policy on the request (for Next) and the response, replacing a client's own, and HSTS only over HTTPS", () => {
    for (const https of [false, true]) {
      const req = { headers: { "content-security-policy": "script-src *" } as Record<string, string | string[] | undefined> };
      const set: Record<string, string> = {};
      applySecurityHeaders(req, { setHeader: (name: string, value: string) => (set[name] = value) }, https);
      const nonce = /'nonce-([^']+)'/.exec(set["Content-Security-Policy"] ?? "")?.[1] ?? "";
      expect(set["Content-Security-Policy"]).toBe(POLICY_AROUND(nonce));
      expect(req.headers["content-security-policy"]).toBe(set["Content-Security-Policy"]);
      expect(set).toMatchObject({ "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY" });
      expect(set["Strict-Transport-Security"]).toBe(https ? STRICT_TRANSPORT_SECURITY : undefined);
    }
  });
});
