import { describe, expect, it } from "vitest";
import { checkCors, isDowngradedOwnOrigin } from "./cors";
import { ADMIN_PROBLEMS, PROBLEMS, problemResponse, renderProblem } from "./problem";

describe("one problem renderer", () => {
  it("renders the admin codes exactly like the public ones: the same type URN, media type and fields", async () => {
    for (const code of [...Object.keys(PROBLEMS), ...Object.keys(ADMIN_PROBLEMS)] as (keyof typeof PROBLEMS | keyof typeof ADMIN_PROBLEMS)[]) {
      const response = problemResponse(code, "detail", "req-1");
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      expect(response.headers.get("cache-control")).toBe("no-store");
      const body = await response.json();
      expect(Object.keys(body).sort()).toEqual(["code", "detail", "requestId", "status", "title", "type"]);
      expect(body).toMatchObject({ type: `urn:problem-type:gas-sponsorship:${code}`, code, status: response.status, requestId: "req-1" });
    }
  });

  it("names the challenge on a 401 sign-in-required, and lets a caller's header win over none", () => {
    expect(renderProblem("unauthorized", "sign in", "r").headers["www-authenticate"]).toBe('Cookie realm="dashboard"');
    expect(renderProblem("rate_limited", "wait", "r", { headers: { "Retry-After": "3" } }).headers["retry-after"]).toBe("3");
  });
});

describe("one CORS decision", () => {
  it("refuses a foreign origin with Vary only, serves an allowed or the app's own origin with its headers, and a request without Origin plainly", () => {
    expect(checkCors("https://evil.example", "api.test", [], null)).toEqual({ refused: true, headers: { vary: "Origin" } });
    expect(checkCors(null, "api.test", [], null)).toEqual({ refused: false, headers: { vary: "Origin" } });
    // A spelling no browser sends is echoed as its serialisation (before: as sent, path and case included).
    for (const spelling of ["https://app.example/x", "HTTPS://APP.EXAMPLE", "https://app.example:443"]) {
      expect(checkCors(spelling, "api.test", ["https://app.example"], null).headers["access-control-allow-origin"]).toBe("https://app.example");
    }
    const allowed = checkCors("https://app.example", "api.test", ["https://app.example"], null);
    expect(allowed).toMatchObject({
      refused: false,
      allowedOrigin: "https://app.example",
      headers: { "access-control-allow-origin": "https://app.example", vary: "Origin" },
    });
    expect(checkCors("http://api.test", "api.test", [], null).refused).toBe(false);
  });

  it("over https, takes the same host over http for a foreign origin (a page injected into a plain-http visit), and both schemes over http", () => {
    expect(checkCors("http://api.test", "api.test", [], "https").refused).toBe(true);
    expect(checkCors("https://api.test", "api.test", [], "https").refused).toBe(false);
    expect(checkCors("http://api.test", "api.test", [], "http").refused).toBe(false);
    expect(checkCors("https://api.test", "api.test", [], "http").refused).toBe(false);
    // Listed by the operator, it is allowed as listed (server.ts's gate for every path agrees).
    expect(checkCors("http://api.test", "api.test", ["http://api.test"], "https").refused).toBe(false);
    expect(isDowngradedOwnOrigin("http://api.test", "api.test", "https", ["http://api.test"])).toBe(false);
    expect(isDowngradedOwnOrigin("http://api.test", "api.test", "https")).toBe(true);
    expect(isDowngradedOwnOrigin("http://api.test", "api.test", "http")).toBe(false);
    expect(isDowngradedOwnOrigin("http://other.test", "api.test", "https")).toBe(false);
  });
});
