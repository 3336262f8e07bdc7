import { describe, expect, it } from "vitest";
import { wallets } from "@/db/schema";
import { eq } from "drizzle-orm";
import { callApi, expectProblem, randomAddress, reconfigure, resolveRoute, setupApiTestContext, TEST_HOST } from "@/test/api-client";
import { CLIENT_IP_HEADER } from "./client-ip";
import { defineRoute } from "./route";

const ctx = setupApiTestContext({ CORS_ORIGINS: "https://wallet.example, http://localhost:5173" });

describe("X-Request-Id", () => {
  it("echoes a valid client value on successes and problems", async () => {
    const ok = await callApi({ path: "/health", headers: { "x-request-id": "abc.DEF_123-x" } });
    expect(ok.headers.get("x-request-id")).toBe("abc.DEF_123-x");
    const problem = await callApi({ path: `/wallets/${randomAddress()}`, headers: { "x-request-id": "trace-42" } });
    expect(expectProblem(problem, 404, "wallet_not_found").requestId).toBe("trace-42");
  });

  it("generates a new one when the client value is missing or invalid", async () => {
    for (const value of [undefined, "", "has space", "x".repeat(129), "semi;colon"]) {
      const answer = await callApi({ path: "/health", headers: value === undefined ? {} : { "x-request-id": value } });
      const id = answer.headers.get("x-request-id")!;
      expect(id).toMatch(/^[A-Za-z0-9._-]{1,128}$/);
      expect(id).not.toBe(value);
    }
    expect(/^[0-9a-f-]{36}$/.test((await callApi({ path: "/health" })).headers.get("x-request-id")!)).toBe(true);
  });
});

describe("405 with Allow", () => {
  it("answers a method the route does not serve with 405 method_not_allowed and the Allow header", async () => {
    const post = expectProblem(await callApi({ method: "POST", path: `/wallets/${randomAddress()}` }), 405, "method_not_allowed");
    expect(post.detail).toContain("GET");
    const answer = await callApi({ method: "DELETE", path: "/sponsorship/request" });
    expectProblem(answer, 405, "method_not_allowed");
    expect(answer.headers.get("allow")).toBe("POST, OPTIONS");
    const get = await callApi({ method: "GET", path: "/wallets/register" });
    expectProblem(get, 405, "method_not_allowed");
    for (const method of ["PUT", "PATCH", "DELETE"]) {
      const a = await callApi({ method, path: "/health" });
      expectProblem(a, 405, "method_not_allowed");
      expect(a.headers.get("allow")).toBe("GET, HEAD, OPTIONS");
    }
  });

  it("serves HEAD like GET without a body, and OPTIONS without Origin with 204 and Allow", async () => {
    const head = await callApi({ method: "HEAD", path: "/health" });
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    expect(head.headers.get("x-request-id")).toBeTruthy();
    const options = await callApi({ method: "OPTIONS", path: "/wallets/register" });
    expect(options.status).toBe(204);
    expect(options.headers.get("allow")).toBe("POST, OPTIONS");
    expect(options.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("CORS", () => {
  it("gives an allowed origin Access-Control-Allow-Origin and Vary: Origin", async () => {
    const answer = await callApi({ path: "/health", headers: { origin: "https://wallet.example" } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("access-control-allow-origin")).toBe("https://wallet.example");
    expect(answer.headers.get("vary")).toContain("Origin");
    expect(answer.headers.get("access-control-expose-headers")).toContain("X-Request-Id");
  });

  it("always allows the app's own origin", async () => {
    const answer = await callApi({ path: "/health", headers: { origin: "http://api.test:3000" } });
    expect(answer.headers.get("access-control-allow-origin")).toBe("http://api.test:3000");
  });

  it("answers a preflight from an allowed origin with 204, the methods and Content-Type among allowed headers", async () => {
    const answer = await callApi({
      method: "OPTIONS",
      path: "/sponsorship/request",
      headers: { origin: "http://localhost:5173", "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
    });
    expect(answer.status).toBe(204);
    expect(answer.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect(answer.headers.get("access-control-allow-methods")).toContain("POST");
    expect(answer.headers.get("access-control-allow-headers")).toContain("Content-Type");
    expect(answer.headers.get("vary")).toContain("Origin");
  });

  it("refuses a request or preflight from any other origin with 403 origin_not_allowed and no CORS headers", async () => {
    for (const method of ["GET", "OPTIONS"]) {
      const answer = await callApi({ method, path: "/health", headers: { origin: "https://evil.example" } });
      expectProblem(answer, 403, "origin_not_allowed");
      expect([...answer.headers.keys()].filter((h) => h.startsWith("access-control-"))).toEqual([]);
    }
    const post = await callApi({ path: "/wallets/register", body: { walletAddress: randomAddress() }, headers: { origin: "null" } });
    expectProblem(post, 403, "origin_not_allowed");
    // Nothing was created for the refused origin.
    expect(await ctx.t.db.$count(wallets)).toBe(0);
  });

  it("serves requests without an Origin header normally", async () => {
    const answer = await callApi({ path: "/health" });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("follows a change of CORS_ORIGINS", async () => {
    reconfigure(ctx, {});
    try {
      expectProblem(await callApi({ path: "/health", headers: { origin: "https://wallet.example" } }), 403, "origin_not_allowed");
    } finally {
      reconfigure(ctx, { CORS_ORIGINS: "https://wallet.example, http://localhost:5173" });
    }
  });
});

describe("unknown paths and unexpected errors", () => {
  it("answers a path no route serves with a problem+json 404", async () => {
    for (const path of ["/nope", "/wallets/0x1/history/extra", "/relay", "/sponsorship/tx/a/b"]) {
      expectProblem(await callApi({ path }), 404, "not_found");
    }
    expectProblem(await callApi({ method: "DELETE", path: "/nope" }), 404, "not_found");
  });

  it("answers an unexpected error with a generic 500 that leaks nothing", async () => {
    const { GET } = defineRoute({
      GET: () => {
        throw new Error("password=hunter2 at db.internal:5432");
      },
    });
    const response = await GET(new Request("http://api.test/boom"), { params: Promise.resolve({}) });
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).not.toContain("hunter2");
    expect(JSON.parse(text)).toMatchObject({ code: "internal_error", status: 500 });
  });
});

describe("a client that hangs up in the middle of its body", () => {
  it("is its own failure: not a 503 for a database outage, and nothing is stored", async () => {
    const address = randomAddress();
    const started = JSON.stringify({ walletAddress: address }).slice(0, 10);
    // What Node hands the route when the connection closes mid-body: a stream that errors with "aborted", ECONNRESET.
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(started));
        controller.error(Object.assign(new Error("aborted"), { code: "ECONNRESET" }));
      },
    });
    const request = new Request(`http://${TEST_HOST}/wallets/register`, {
      method: "POST",
      headers: { host: TEST_HOST, [CLIENT_IP_HEADER]: "198.51.100.77", "content-type": "application/json", "content-length": "64" },
      body,
      duplex: "half",
    } as RequestInit);
    const { module, params } = await resolveRoute("/wallets/register");
    const answer = await module.POST!(request, { params: Promise.resolve(params) });

    expect(answer.status).toBe(408);
    expect(await answer.json()).toMatchObject({ code: "request_timeout", detail: "The request body was not received: the client closed the connection" });
    expect(await ctx.t.db.select().from(wallets).where(eq(wallets.walletAddress, address))).toEqual([]);
  });
});
