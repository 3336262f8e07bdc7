import { describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "@/lib/openapi";
import { createResponseValidator } from "./openapi-validator";

const validate = createResponseValidator(JSON.parse(JSON.stringify(buildOpenApiDocument())));

const wallet = {
  id: "0b7e3c52-8d6f-4c1e-9a57-3f2d1c0e9b8a",
  walletAddress: "0x52908400098527886e0f7030069857d2e4169ee7",
  firstSeenAt: "2026-11-22T10:00:00.000Z",
  lastSeenAt: "2026-11-22T10:00:00.000Z",
  sponsorshipCount: 0,
  isBlocked: false,
};
const problem = (status: number, code: string) => ({
  type: `urn:problem-type:gas-sponsorship:${code}`,
  title: "t",
  status,
  detail: "d",
  code,
  requestId: "4f7f0c5e-3c55-4a3b-9d6e-7b1c2f0a9e11",
});
const json = (method: string, path: string, status: number, body: unknown, contentType = "application/json") => ({
  method,
  path,
  status,
  contentType,
  body: JSON.stringify(body),
});

describe("the OpenAPI response validator (test helper)", () => {
  it("accepts a response exactly as documented", () => {
    expect(validate(json("GET", `/wallets/${wallet.walletAddress}`, 200, wallet))).toEqual([]);
    expect(validate(json("GET", "/wallets/0x12", 400, problem(400, "invalid_address"), "application/problem+json"))).toEqual([]);
  });

  it("fails a response with a field the document does not describe", () => {
    const errors = validate(json("GET", `/wallets/${wallet.walletAddress}`, 200, { ...wallet, secret: "x" }));
    expect(errors.join("\n")).toMatch(/additional properties 'secret'/);
  });

  it("fails a response missing a required field or with a wrong type", () => {
    const { isBlocked: _dropped, ...missing } = wallet;
    expect(validate(json("GET", `/wallets/${wallet.walletAddress}`, 200, missing))).not.toEqual([]);
    expect(validate(json("GET", `/wallets/${wallet.walletAddress}`, 200, { ...wallet, sponsorshipCount: "1" }))).not.toEqual([]);
  });

  it("fails a status the operation does not document", () => {
    expect(validate(json("GET", `/wallets/${wallet.walletAddress}`, 409, problem(409, "request_open"), "application/problem+json"))).toEqual([
      expect.stringMatching(/status 409 is not documented/),
    ]);
  });

  it("fails a media type the response does not document", () => {
    expect(validate(json("GET", `/wallets/${wallet.walletAddress}`, 200, wallet, "text/plain"))[0]).toMatch(/media type text\/plain/);
  });

  it("takes a static path before a templated one", () => {
    expect(validate(json("GET", "/sponsorship/request", 405, problem(405, "method_not_allowed"), "application/problem+json"))).toEqual([]);
    expect(validate(json("POST", "/sponsorship/request", 201, wallet))).not.toEqual([]);
  });

  it("allows only the document's path-independent problems on paths without the operation", () => {
    expect(validate(json("GET", "/no/such/thing", 404, problem(404, "not_found"), "application/problem+json"))).toEqual([]);
    expect(validate(json("GET", "/no/such/thing", 200, { hello: 1 }))).not.toEqual([]);
    expect(validate(json("GET", "/no/such/thing", 404, problem(404, "wallet_not_found"), "application/problem+json"))).not.toEqual([]);
  });

  it("validates a text/plain answer as a string, not as JSON", () => {
    expect(
      validate({ method: "GET", path: "/metrics", status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8", body: "# HELP x\nx 1\n" }),
    ).toEqual([]);
    expect(validate({ method: "GET", path: "/metrics", status: 401, contentType: "application/problem+json", body: '{"code":"unauthorized"}' })).not.toEqual(
      [],
    );
  });

  it("checks HEAD as GET without a body, and leaves the pages alone", () => {
    expect(validate({ method: "HEAD", path: "/health", status: 200, contentType: "application/json", body: "" })).toEqual([]);
    expect(validate({ method: "GET", path: "/request", status: 200, contentType: "text/html", body: "<html>" })).toEqual([]);
  });
});
