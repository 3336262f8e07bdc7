import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import type { z } from "zod";
import { sponsorshipRequests, wallets } from "@/db/schema";
import { PROBLEMS, isProblemCode } from "@/lib/http/problem";
import { callApi, setupApiTestContext, TEST_HOST, type ApiAnswer, type ApiCall } from "@/test/api-client";
import {
  healthResponse,
  historyResponse,
  problemResponseSchema,
  relayTransactionResponse,
  sponsorshipRequestByTransactionResponse,
  sponsorshipRequestDetailResponse,
  sponsorshipRequestResponse,
  walletResponse,
} from "@/lib/sponsorship/schemas";

/**
 * Bad input never yields a 500 (issue 2): random methods, paths, query strings, headers and bodies at every
 * endpoint. Every answer is a well-formed problem (status and code agree with the table) or a success whose body
 * parses with the endpoint's schema, and afterwards the database holds exactly what the successful calls created.
 */

const ctx = setupApiTestContext({ CORS_ORIGINS: "https://ok.example" });

/** A few addresses so that valid registrations and requests happen among the noise. */
const pool = Array.from({ length: 6 }, (_, i) => `0x${(i + 1).toString(16).repeat(40)}`);
const ips = ["198.51.100.1", "198.51.100.2", "2001:db8::1", "203.0.113.9"];

const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-fA-F]{${n}}$`));
const printable = (maxLength: number) => fc.string({ unit: "grapheme-ascii", maxLength });
const anyString = (maxLength: number) => fc.string({ unit: "grapheme", maxLength });

const addressLike = fc.oneof(
  fc.constantFrom(...pool),
  fc.constantFrom(...pool).map((a) => a.toUpperCase().replace("0X", "0x")),
  hex(40).map((h) => `0x${h}`),
  hex(39).map((h) => `0x${h}`),
  hex(41).map((h) => `0x${h}`),
  anyString(60),
);

const segment = fc.oneof(
  addressLike,
  fc.uuid(),
  hex(64).map((h) => `0x${h}`),
  fc.constantFrom("register", "request", "tx", "history", "..", ".", "%", "%ZZ", "null", "undefined", "0", "-1"),
  anyString(30),
  fc.constant("a".repeat(1025)),
);

const seg = segment.map((s) => encodeURIComponent(s) || "x");
const path = fc.oneof(
  fc.constantFrom("/wallets/register", "/sponsorship/request", "/health", "/openapi.json"),
  seg.map((s) => `/wallets/${s}`),
  seg.map((s) => `/wallets/${s}/history`),
  seg.map((s) => `/sponsorship/${s}`),
  seg.map((s) => `/sponsorship/tx/${s}`),
  seg.map((s) => `/relay/${s}`),
  fc.array(seg, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join("/")}`),
);

const queryValue = fc.oneof(fc.uuid(), fc.integer({ min: -5, max: 200 }).map(String), printable(12), fc.constantFrom("", "1.5", "50", "1e1"));
const query = fc
  .array(fc.tuple(fc.constantFrom("cursor", "limit", "x", "walletAddress"), queryValue), { maxLength: 3 })
  .map((pairs) => (pairs.length === 0 ? "" : `?${new URLSearchParams(pairs).toString()}`));

const body = fc.oneof(
  fc.constant(undefined),
  fc.record({ walletAddress: fc.oneof(addressLike, fc.jsonValue()) }),
  fc
    .record({ walletAddress: addressLike }, { requiredKeys: [] })
    .chain((o) => fc.dictionary(printable(8), fc.jsonValue(), { maxKeys: 2 }).map((extra) => ({ ...extra, ...o }))),
  fc.jsonValue(),
);

const rawBody = fc.oneof(anyString(40), fc.constant("x".repeat(17 * 1024)), fc.constant(`{"walletAddress":"${pool[0]}"`));

/** Present now and then (absent most of the time, so that the other rules get exercised too). */
const sometimes = <T>(arb: fc.Arbitrary<T>, weight = 1, absent = 4) =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: absent }, { arbitrary: arb, weight });

const headers = fc.record({
  "content-type": fc.oneof(
    { arbitrary: fc.constantFrom("application/json", "application/json; charset=utf-8", "APPLICATION/JSON"), weight: 6 },
    { arbitrary: fc.constantFrom("text/plain", "application/jsonx", "", "multipart/form-data"), weight: 1 },
    { arbitrary: fc.constant(undefined), weight: 1 },
  ),
  origin: sometimes(fc.oneof(fc.constantFrom("https://ok.example", `http://${TEST_HOST}`, "https://evil.example", "null", "file://"), printable(20))),
  "x-request-id": sometimes(printable(140), 1, 1),
  "user-agent": sometimes(printable(600), 1, 1),
  "x-forwarded-for": sometimes(fc.oneof(fc.ipV4(), printable(30)), 1, 1),
  accept: sometimes(fc.constantFrom("application/json", "text/html", "*/*")),
});

const method = fc.oneof(
  { arbitrary: fc.constantFrom("GET", "POST"), weight: 8 },
  { arbitrary: fc.constantFrom("HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"), weight: 2 },
);

const noise: fc.Arbitrary<ApiCall> = fc
  .record({
    method,
    path,
    query,
    body,
    raw: sometimes(rawBody, 1, 5),
    headers,
    ip: fc.constantFrom(...ips),
  })
  .map(({ method, path: p, query: q, body: b, raw, headers: h, ip }) => {
    const withBody = method !== "GET" && method !== "HEAD";
    return {
      method,
      path: `${p}${q}`,
      ...(withBody && raw !== undefined ? { rawBody: raw } : {}),
      ...(withBody && raw === undefined && b !== undefined ? { body: b } : {}),
      headers: Object.fromEntries(Object.entries(h).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== "")),
      ip,
    } satisfies ApiCall;
  });

/** Calls a client would make (on the pool's wallets), so that successes and state changes happen too. */
const plausible: fc.Arbitrary<ApiCall> = fc
  .record({
    kind: fc.constantFrom("register", "request", "wallet", "history"),
    address: fc.constantFrom(...pool),
    ip: fc.constantFrom(...ips),
    userAgent: fc.option(printable(40)),
  })
  .map(({ kind, address, ip, userAgent }): ApiCall => {
    const headers: Record<string, string> = userAgent === null ? {} : { "user-agent": userAgent };
    if (kind === "register") return { path: "/wallets/register", body: { walletAddress: address }, ip, headers };
    if (kind === "request") return { path: "/sponsorship/request", body: { walletAddress: address }, ip, headers };
    return { path: kind === "wallet" ? `/wallets/${address}` : `/wallets/${address}/history`, ip, headers };
  });

const call = fc.oneof({ arbitrary: plausible, weight: 1 }, { arbitrary: noise, weight: 3 });

function successSchema(method: string, pathname: string): z.ZodType | undefined {
  if (pathname === "/health") return healthResponse;
  if (pathname === "/wallets/register") return walletResponse;
  if (pathname === "/sponsorship/request") return sponsorshipRequestResponse;
  if (/^\/wallets\/[^/]+\/history$/.test(pathname)) return historyResponse;
  if (/^\/wallets\/[^/]+$/.test(pathname)) return walletResponse;
  if (/^\/sponsorship\/tx\/[^/]+$/.test(pathname)) return sponsorshipRequestByTransactionResponse;
  if (/^\/sponsorship\/[^/]+$/.test(pathname)) return sponsorshipRequestDetailResponse;
  if (/^\/relay\/[^/]+$/.test(pathname)) return relayTransactionResponse;
  void method;
  return undefined;
}

const created = { wallets: new Set<string>(), requests: new Set<string>() };
const statuses = new Map<number, number>();

function check(c: ApiCall, answer: ApiAnswer): void {
  statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
  expect(answer.status, `${c.method} ${c.path}`).toBeLessThan(500);
  expect(answer.headers.get("x-request-id")).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
  if (c.method === "HEAD") {
    // HEAD answers like GET without the body.
    expect(answer.text).toBe("");
    if (answer.status >= 400) expect(answer.headers.get("content-type")).toBe("application/problem+json");
    return;
  }
  if (answer.status >= 400) {
    expect(answer.headers.get("content-type")).toBe("application/problem+json");
    const problem = problemResponseSchema.parse(answer.json);
    expect(problem.status).toBe(answer.status);
    expect(isProblemCode(problem.code)).toBe(true);
    expect(PROBLEMS[problem.code as keyof typeof PROBLEMS].status).toBe(answer.status);
    if (problem.code === "rate_limited") expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    if (problem.code === "method_not_allowed") expect(answer.headers.get("allow")).toBeTruthy();
    return;
  }
  if (c.method === "OPTIONS") {
    expect(answer.status).toBe(204);
    expect(answer.text).toBe("");
    return;
  }
  const pathname = new URL(c.path, `http://${TEST_HOST}`).pathname;
  if (pathname === "/openapi.json") {
    expect(answer.json).toMatchObject({ openapi: "3.1.0" });
    return;
  }
  const schema = successSchema(c.method ?? "GET", pathname);
  expect(schema, `no success expected for ${c.method} ${c.path} (${answer.status})`).toBeDefined();
  const parsed = schema!.parse(answer.json) as { id: string; walletAddress?: string };
  if (answer.status === 201 && pathname === "/wallets/register") created.wallets.add(parsed.walletAddress!);
  if (answer.status === 201 && pathname === "/sponsorship/request") created.requests.add(parsed.id);
}

describe("property: bad input never yields a 500", () => {
  beforeAll(() => {
    created.wallets.clear();
    created.requests.clear();
  });

  it("answers every random call with a well-formed problem or a success of the endpoint's shape", async () => {
    await fc.assert(
      fc.asyncProperty(call, async (c) => {
        check(c, await callApi(c));
      }),
      { numRuns: 600 },
    );
  });

  afterAll(async () => {
    // The run was not vacuous: valid calls succeeded among the refusals.
    expect(created.wallets.size, JSON.stringify([...statuses])).toBeGreaterThan(0);
    expect(created.requests.size, JSON.stringify([...statuses])).toBeGreaterThan(0);
    expect([...statuses.keys()].some((s) => s === 200)).toBe(true);
    // Nothing but what valid calls created: every wallet row was a 201 of /wallets/register, every request a 201.
    const walletRows = await ctx.t.db.select({ address: wallets.walletAddress }).from(wallets);
    expect(new Set(walletRows.map((w) => w.address))).toEqual(created.wallets);
    const requestRows = await ctx.t.db.select({ id: sponsorshipRequests.id }).from(sponsorshipRequests);
    expect(new Set(requestRows.map((r) => r.id))).toEqual(created.requests);
  });
});
