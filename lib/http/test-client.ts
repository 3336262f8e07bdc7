/**
 * Test support (not shipped behaviour): calls the API's route handlers directly, the way Next would, with a
 * router that mirrors app/(api) (static segments before dynamic ones, then the catch-all). Used by the route
 * tests and the property-based test. Every answer is checked against the OpenAPI document GET /openapi.json
 * serves (test/openapi-validator.ts): an undocumented status, media type or field fails the test that met it.
 */
import { afterAll, beforeAll, expect } from "vitest";
import { problemResponseSchema, type ProblemResponse } from "@/lib/sponsorship/schemas";
import { parseConfig, type Config } from "@/lib/config";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { createResponseValidator, type ResponseValidator } from "@/test/openapi-validator";
import { setAppContextForTests } from "./app-context";
import type { NextRouteHandler, RouteParams } from "./route";
import { CLIENT_IP_HEADER } from "./client-ip";

type RouteModule = Record<string, NextRouteHandler>;

const routes: { pattern: RegExp; names: string[]; load: () => Promise<RouteModule> }[] = [
  { pattern: /^\/health$/, names: [], load: () => import("@/app/(api)/health/route") },
  { pattern: /^\/openapi\.json$/, names: [], load: () => import("@/app/(api)/openapi.json/route") },
  { pattern: /^\/faucet$/, names: [], load: () => import("@/app/(api)/faucet/route") },
  { pattern: /^\/wallets\/register$/, names: [], load: () => import("@/app/(api)/wallets/register/route") },
  { pattern: /^\/sponsorship\/request$/, names: [], load: () => import("@/app/(api)/sponsorship/request/route") },
  { pattern: /^\/wallets\/([^/]+)\/history$/, names: ["address"], load: () => import("@/app/(api)/wallets/[address]/history/route") },
  { pattern: /^\/sponsorship\/tx\/([^/]+)$/, names: ["hash"], load: () => import("@/app/(api)/sponsorship/tx/[hash]/route") },
  { pattern: /^\/wallets\/([^/]+)$/, names: ["address"], load: () => import("@/app/(api)/wallets/[address]/route") },
  { pattern: /^\/sponsorship\/([^/]+)$/, names: ["id"], load: () => import("@/app/(api)/sponsorship/[id]/route") },
  { pattern: /^\/relay\/([^/]+)$/, names: ["id"], load: () => import("@/app/(api)/relay/[id]/route") },
];

const decode = (segment: string) => {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
};

async function resolve(pathname: string): Promise<{ module: RouteModule; params: RouteParams }> {
  const path = pathname.length > 1 ? pathname.replace(/\/+$/, "") : pathname;
  for (const route of routes) {
    const match = route.pattern.exec(path);
    if (match) {
      const params: RouteParams = {};
      route.names.forEach((name, i) => (params[name] = decode(match[i + 1]!)));
      return { module: await route.load(), params };
    }
  }
  const catchAll = (await import("@/app/(api)/[...path]/route")) as RouteModule;
  return { module: catchAll, params: { path: path.split("/").filter(Boolean).map(decode) } };
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

export async function callApi(call: ApiCall): Promise<ApiAnswer> {
  const method = (call.method ?? (call.body !== undefined || call.rawBody !== undefined ? "POST" : "GET")).toUpperCase();
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
  const { module: routeModule, params } = await resolve(url.pathname);
  const handler = routeModule[method];
  if (!handler) throw new Error(`route module has no ${method} export`);
  const response = await handler(request, { params: Promise.resolve(params) });
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

export const randomAddress = () =>
  `0x${Array.from(crypto.getRandomValues(new Uint8Array(20)), (b) => b.toString(16).padStart(2, "0")).join("")}` as `0x${string}`;

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
