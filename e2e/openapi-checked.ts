import { expect, test as base, type APIRequestContext, type APIResponse } from "@playwright/test";
import { createResponseValidator, type ResponseValidator } from "@/test/openapi-validator";

/**
 * The API spec's `request` fixture, with every answer checked against the OpenAPI document the stack serves
 * (test/openapi-validator.ts): an undocumented status, media type or field fails the test that met it.
 */

type Options = { method?: string };
const METHODS = { get: "GET", post: "POST", put: "PUT", patch: "PATCH", delete: "DELETE", head: "HEAD" } as const;

function checked(request: APIRequestContext, validate: ResponseValidator): APIRequestContext {
  const check = async (method: string, url: string, response: APIResponse) => {
    const body = method === "HEAD" ? "" : await response.text();
    const violations = validate({ method, path: url, status: response.status(), contentType: response.headers()["content-type"] ?? null, body });
    expect(violations, `${method} ${url}: the answer is not as /openapi.json documents it:\n${body.slice(0, 500)}`).toEqual([]);
    return response;
  };
  return new Proxy(request, {
    get(target, property, receiver) {
      const original = Reflect.get(target, property, receiver) as unknown;
      if (typeof original !== "function") return original;
      if (property === "fetch") {
        return async (url: string, options?: Options) =>
          check((options?.method ?? "GET").toUpperCase(), url, await target.fetch(url, options as Parameters<APIRequestContext["fetch"]>[1]));
      }
      const method = METHODS[property as keyof typeof METHODS];
      if (!method) return original.bind(target);
      return async (url: string, options?: unknown) =>
        check(method, url, await (original as (u: string, o?: unknown) => Promise<APIResponse>).call(target, url, options));
    },
  });
}

export const test = base.extend<object, { apiValidator: ResponseValidator }>({
  apiValidator: [
    async ({ playwright }, provide, workerInfo) => {
      const context = await playwright.request.newContext({ baseURL: workerInfo.project.use.baseURL });
      const response = await context.get("/openapi.json");
      expect(response.status()).toBe(200);
      const validator = createResponseValidator(await response.json());
      await context.dispose();
      await provide(validator);
    },
    { scope: "worker" },
  ],
  request: async ({ request, apiValidator }, provide) => {
    await provide(checked(request, apiValidator));
  },
});
