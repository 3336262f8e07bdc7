/**
 * Test support: calls the API's route handlers directly, the way Next would, through the route table generated
 * from app/(api) (test/routes.generated.ts: static segments before dynamic ones, then the catch-all; admin routes
 * included). `callRoute` answers the raw Response; `callApi` also checks every answer against the OpenAPI document
 * GET /openapi.json serves (test/openapi-validator.ts): an undocumented status, media type or field fails the test
 * that met it.
 */
import { afterAll, beforeAll, expect } from "vitest";
import type { Address } from "viem";
import { problemResponseSchema, type ProblemResponse } from "@/lib/sponsorship/schemas";
import { parseConfig, type Config } from "@/lib/config";
import { setAppContextForTests } from "@/lib/http/app-context";
import type { NextRouteHandler, RouteParams } from "@/lib/http/route";
import { CLIENT_IP_HEADER } from "@/lib/http/client-ip";
import { createTestDatabase, type TestDatabase } from "./db";
import { createResponseValidator, type ResponseValidator } from "./openapi-validator";
import { apiRoutes } from "./routes.generated";

type RouteModule = Record<string, NextRouteHandler>;

/** One entry of test/routes.generated.ts. */
export type GeneratedRoute = {
  /** The folder path under app/(api), e.g. `/wallets/[address]/history`. */
  route: string;
  pattern: RegExp;
  /** The dynamic segments' names, in the order of the pattern's groups. */
  names: string[];
  /** The catch-all segment's name (`[...path]`), whose value is the whole path's segments. */
  catchAll?: string;
  load: () => Promise<unknown>;
};

const decode = (segment: string) => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
};

export async function resolveRoute(pathname: string): Promise<{ module: RouteModule; params: RouteParams }> {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, "") : pathname;
  for (const route of apiRoutes) {
    const match = route.pattern.exec(path);
    if (!match) continue;
    const params: RouteParams = {};
    route.names.forEach((name, i) => (params[name] = decode(match[i + 1]!)));
    if (route.catchAll) params[route.catchAll] = path.split("/").filter(Boolean).map(decode);
    return { module: (await route.load()) as RouteModule, params };
  }
  throw new Error(`no route serves ${pathname}`);
}

export type ApiCall = {
  method?: string;
  path: string;
  /** Serialised as JSON with `content-type: application/json` unless `rawBody` or a content type is given. */
  body?: unknown;
  rawBody?: string | Uint8Array;
  headers?: Record<string, string>;
  /** The client address server.ts would hand over (default 198.51.100.1). */
  ip?: string;
};

export type ApiAnswer = {
  status: number;
  headers: Headers;
  text: string;
  /** The parsed JSON body (undefined when the body is empty or not JSON). */
  json: unknown;
};

export const TEST_HOST = "api.test:3000";

let documentValidator: Promise<ResponseValidator> | undefined;

/** The validator over the served document, fetched once per test file from the route itself. */
function servedDocumentValidator(): Promise<ResponseValidator> {
  documentValidator ??= (async () => {
    const route = (await import("@/app/(api)/openapi.json/route")) as RouteModule;
    const response = await route.GET!(new Request(`http://${TEST_HOST}/openapi.json`), { params: Promise.resolve({}) });
    return createResponseValidator(await response.json());
  })();
  return documentValidator;
}

const methodOf = (call: ApiCall) => (call.method ?? (call.body !== undefined || call.rawBody !== undefined ? "POST" : "GET")).toUpperCase();

/** The handler's Response to `call`, as the route tree would route it (no check against the OpenAPI document). */
export async function callRoute(call: ApiCall): Promise<Response> {
  const method = methodOf(call);
  const headers = new Headers({ host: TEST_HOST, [CLIENT_IP_HEADER]: call.ip ?? "198.51.100.1" });
  let body: string | Uint8Array | undefined;
  if (call.rawBody !== undefined) body = call.rawBody;
  else if (call.body !== undefined) {
    body = JSON.stringify(call.body);
    headers.set("content-type", "application/json");
  }
  for (const [name, value] of Object.entries(call.headers ?? {})) headers.set(name, value);
  const url = new URL(call.path, `http://${TEST_HOST}`);
  const request = new Request(url, { method, headers, body: method === "GET" || method === "HEAD" ? undefined : (body as BodyInit | undefined) });
  const { module: routeModule, params } = await resolveRoute(url.pathname);
  const handler = routeModule[method];
  if (!handler) throw new Error(`route module has no ${method} export`);
  return handler(request, { params: Promise.resolve(params) });
}

/** `callRoute`, with the answer read and checked against the OpenAPI document the API serves. */
export async function callApi(call: ApiCall): Promise<ApiAnswer> {
  const method = methodOf(call);
  const response = await callRoute(call);
  const text = await response.text();
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  const violations = (await servedDocumentValidator())({
    method,
    path: call.path,
    status: response.status,
    contentType: response.headers.get("content-type"),
    body: text,
  });
  expect(violations, `the answer is not as /openapi.json documents it:\n${text.slice(0, 500)}`).toEqual([]);
  return { status: response.status, headers: response.headers, text, json };
}

/* ------------------------------------------------------------ test database */

export type ApiTestContext = { t: TestDatabase; config: Config };

/**
 * A fresh migrated database for this test file, wired into the route handlers with a configuration parsed from
 * `env` (no chain unless RPC_URL is given). Read `ctx.t` / `ctx.config` inside tests.
 */
export function setupApiTestContext(env: Record<string, string> = {}): ApiTestContext {
  const ctx = {} as ApiTestContext;
  beforeAll(async () => {
    ctx.t = await createTestDatabase();
    ctx.config = parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", ...env, DATABASE_URL: ctx.t.url });
    setAppContextForTests({ db: ctx.t.db, config: ctx.config });
  });
  afterAll(async () => {
    setAppContextForTests({});
    await ctx.t?.drop();
  });
  return ctx;
}

/** Replaces the configuration the handlers see (same database). */
export function reconfigure(ctx: ApiTestContext, env: Record<string, string>): Config {
  ctx.config = parseConfig({ DATA_DIR: "/nonexistent/sponsorship-test", LOG_LEVEL: "silent", ...env, DATABASE_URL: ctx.t.url });
  setAppContextForTests({ db: ctx.t.db, config: ctx.config });
  return ctx.config;
}

export const randomAddress = () => `0x${Array.from(crypto.getRandomValues(new Uint8Array(20)), (b) => b.toString(16).padStart(2, "0")).join("")}` as Address;

/** Asserts a well-formed problem+json answer with this status and code (and the X-Request-Id in the body). */
export function expectProblem(answer: ApiAnswer, status: number, code: string): ProblemResponse {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers.get("content-type")).toBe("application/problem+json");
  const problem = problemResponseSchema.parse(answer.json);
  expect(problem.code).toBe(code);
  expect(problem.status).toBe(status);
  expect(problem.requestId).toBe(answer.headers.get("x-request-id"));
  return problem;
}
