/**
 * Test support: checks an API response against the OpenAPI document the service serves, with an independent
 * JSON Schema validator (Ajv, 2020-12 dialect, OpenAPI 3.1's), so a status, a media type or a body field the
 * document does not describe fails the test that met it. Used by the Vitest client over the route handlers
 * (test/api-client.ts) and by the Playwright API spec over HTTP (e2e/api.spec.ts).
 *
 * The document is generated from the same zod schemas the handlers use; checking it with zod again would prove
 * nothing, hence Ajv over the served JSON.
 */
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import type { FormatsPlugin } from "ajv-formats";

// ajv-formats is CommonJS: its default export arrives wrapped under ESM interop in some loaders.
const addFormats = ((addFormatsModule as unknown as { default?: FormatsPlugin }).default ?? addFormatsModule) as FormatsPlugin;

export type ObservedResponse = {
  method: string;
  /** The path as sent (query string allowed; it is ignored). */
  path: string;
  status: number;
  contentType: string | null;
  /** The response body as text ("" when empty). */
  body: string;
};

type Operation = { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type OpenApiDocument = { paths: Record<string, Record<string, Operation>> };

/**
 * Paths that are not the JSON API: the home page and the other pages, the reference page and Next's assets.
 * Their responses are not checked here.
 */
const NOT_THE_API = [/^\/$/, /^\/request(\/|$)/, /^\/dashboard(\/|$)/, /^\/docs(\/|$)/, /^\/_next\//, /^\/favicon\.ico$/];

/**
 * Answers the document describes outside its operations (its `info.description`): a path that matches no
 * endpoint, a malformed percent-escape, a foreign origin, a method the path does not serve. They must still be
 * well-formed problems.
 */
const CODES_OUTSIDE_OPERATIONS: Record<number, string[]> = {
  400: ["invalid_path"],
  403: ["origin_not_allowed"],
  404: ["not_found"],
  405: ["method_not_allowed"],
};

const PROBLEM_SCHEMA = "#/components/schemas/Problem";
const DOC_ID = "openapi.json";

const pointer = (...segments: string[]) => segments.map((s) => s.replaceAll("~", "~0").replaceAll("/", "~1")).join("/");

function templateRegex(template: string): RegExp {
  const parts = template.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^$()|[\]\\{}]/g, "\\$&"));
  return new RegExp(`^${parts.join("[^/]+")}$`);
}

export type ResponseValidator = (response: ObservedResponse) => string[];

/** A validator over one OpenAPI 3.1 document: returns what is wrong with a response ([] when it is documented). */
export function createResponseValidator(document: unknown): ResponseValidator {
  const doc = document as OpenApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema({ ...(document as object), $id: DOC_ID });
  const compiled = new Map<string, ReturnType<Ajv2020["compile"]>>();
  const validatorAt = (ref: string) => {
    let validate = compiled.get(ref);
    if (!validate) {
      validate = ajv.compile({ $ref: `${DOC_ID}${ref}` });
      compiled.set(ref, validate);
    }
    return validate;
  };

  // Static paths before templated ones, so /sponsorship/request is not taken for /sponsorship/{id}.
  const templates = Object.keys(doc.paths)
    .map((template) => ({ template, regex: templateRegex(template), params: (template.match(/\{/g) ?? []).length }))
    .sort((a, b) => a.params - b.params);

  const checkBody = (ref: string, body: string, what: string, mediaType = "application/json"): string[] => {
    // A JSON media type is parsed and validated as JSON; any other (text/plain) is validated as the string it is.
    let value: unknown = body;
    if (/^application\/([\w.-]+\+)?json$/.test(mediaType)) {
      try {
        value = JSON.parse(body);
      } catch {
        return [`${what}: the body is not JSON: ${body.slice(0, 200)}`];
      }
    }
    const validate = validatorAt(ref);
    if (validate(value)) return [];
    return (validate.errors ?? []).map(
      (e) =>
        `${what}: ${e.instancePath || "(body)"} ${e.message}${e.params && "additionalProperty" in e.params ? ` '${String(e.params.additionalProperty)}'` : ""}`,
    );
  };

  return (response) => {
    const method = response.method.toUpperCase();
    const sent = new URL(response.path, "http://validator.invalid").pathname;
    // The server serves a path with a trailing slash as the path without it (next.config: skipTrailingSlashRedirect).
    const pathname = sent.length > 1 ? sent.replace(/\/+$/, "") : sent;
    const what = `${method} ${pathname} -> ${response.status}`;
    if (NOT_THE_API.some((r) => r.test(pathname))) return [];
    // A CORS preflight is HTTP plumbing (docs/api.md "CORS"), not an operation; its refusal is still a problem.
    if (method === "OPTIONS" && response.status === 204) return [];
    const mediaType = response.contentType?.split(";")[0]?.trim().toLowerCase() ?? null;
    const hasBody = method !== "HEAD" && response.body !== "";

    const match = templates.find((t) => t.regex.test(pathname));
    const operation = match ? doc.paths[match.template]?.[method === "HEAD" ? "get" : method.toLowerCase()] : undefined;
    if (!operation) {
      const allowed = CODES_OUTSIDE_OPERATIONS[response.status];
      if (!allowed) return [`${what}: no documented operation, and not one of the answers the document gives for any path`];
      if (mediaType !== "application/problem+json") return [`${what}: expected application/problem+json, got ${mediaType}`];
      if (!hasBody) return [];
      const errors = checkBody(PROBLEM_SCHEMA, response.body, what);
      const code = (JSON.parse(response.body) as { code?: string }).code;
      if (!allowed.includes(code ?? "")) errors.push(`${what}: code ${code} is not documented for a path without this operation`);
      return errors;
    }
    const status = String(response.status);
    const responses = operation.responses ?? {};
    const key = status in responses ? status : `${status[0]}XX` in responses ? `${status[0]}XX` : "default" in responses ? "default" : undefined;
    if (!key) return [`${what}: status ${status} is not documented for ${method === "HEAD" ? "GET" : method} ${match!.template}`];
    const content = responses[key]?.content;
    if (!content) return hasBody ? [`${what}: a body, but the document declares none`] : [];
    if (!hasBody) return [];
    if (!mediaType || !(mediaType in content)) {
      return [`${what}: media type ${mediaType} is not documented (${Object.keys(content).join(", ")})`];
    }
    const ref = `#/${pointer("paths", match!.template, method === "HEAD" ? "get" : method.toLowerCase(), "responses", key, "content", mediaType, "schema")}`;
    return checkBody(ref, response.body, what, mediaType);
  };
}
