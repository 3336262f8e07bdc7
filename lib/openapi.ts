import { z } from "zod";
import { MAX_BODY_BYTES } from "@/lib/http/body";
import { PROBLEMS, problemType, type ProblemCode } from "@/lib/http/problem";
import { apiSchemas, historyQuery, transactionHashParam, uuid, walletAddressInput } from "@/lib/sponsorship/schemas";

/**
 * The OpenAPI 3.1 document served at GET /openapi.json, generated from the zod schemas the handlers use
 * (lib/sponsorship/schemas.ts) with zod's own JSON Schema output (JSON Schema 2020-12, OpenAPI 3.1's dialect).
 * The error codes and titles come from lib/http/problem.ts. Only the prose below is written by hand.
 */

type JsonSchema = Record<string, unknown>;

/** JSON Schema of one zod schema, without the `$schema`/`$id` keys a Schema Object does not need. */
function jsonSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _schema, $id: _id, ...rest } = z.toJSONSchema(schema, { unrepresentable: "any", override: simplify }) as JsonSchema;
  return rest;
}

/** The date-time regex zod emits is exact but unreadable; `format: date-time` with a description says it. */
function simplify(ctx: { jsonSchema: JsonSchema }): void {
  const schema = ctx.jsonSchema;
  if (schema.format === "date-time") {
    delete schema.pattern;
    schema.description ??= "ISO 8601 in UTC with milliseconds";
  }
  if (schema.type === "integer" && schema.maximum === Number.MAX_SAFE_INTEGER) delete schema.maximum;
}

function componentSchemas(): Record<string, JsonSchema> {
  const { schemas } = z.toJSONSchema(apiSchemas, {
    uri: (id) => `#/components/schemas/${id}`,
    unrepresentable: "any",
    override: simplify,
  }) as { schemas: Record<string, JsonSchema> };
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const { $schema: _schema, $id: _id, ...rest } = schema;
      return [id, rest];
    }),
  );
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const headerRefs = { "X-Request-Id": { $ref: "#/components/headers/X-Request-Id" } };

function success(description: string, schemaId: string, extraHeaders: Record<string, unknown> = {}) {
  return { description, headers: { ...headerRefs, ...extraHeaders }, content: { "application/json": { schema: ref(schemaId) } } };
}

/** A problem response listing the codes (all of one status) a client may meet. */
function problems(codes: ProblemCode[]) {
  const headers: Record<string, unknown> = { ...headerRefs };
  if (codes.includes("rate_limited") || codes.includes("unavailable")) headers["Retry-After"] = { $ref: "#/components/headers/Retry-After" };
  if (codes.includes("method_not_allowed")) headers.Allow = { description: "The methods the path supports", schema: { type: "string" } };
  return {
    description: codes.map((code) => `\`${code}\`: ${PROBLEMS[code].title}`).join("; "),
    headers,
    content: {
      "application/problem+json": {
        schema: ref("Problem"),
        examples: Object.fromEntries(
          codes.map((code) => [
            code,
            {
              value: {
                type: problemType(code),
                title: PROBLEMS[code].title,
                status: PROBLEMS[code].status,
                detail: PROBLEMS[code].title,
                code,
                requestId: "4f7f0c5e-3c55-4a3b-9d6e-7b1c2f0a9e11",
              },
            },
          ]),
        ),
      },
    },
  };
}

/**
 * Responses grouped by status from a list of codes. Any operation may answer `408 request_timeout` to a client too
 * slow to send its request (server.ts). An operation that reads or writes PostgreSQL may answer `503 unavailable`
 * (with Retry-After) while the database cannot be reached; one that does not (`database: false`: GET /openapi.json,
 * built in memory) never does, and does not list it.
 */
function errorResponses(codes: ProblemCode[], { database = true }: { database?: boolean } = {}) {
  const groups = new Map<number, ProblemCode[]>();
  const always: ProblemCode[] = [
    "origin_not_allowed",
    "method_not_allowed",
    "request_timeout",
    "internal_error",
    ...(database ? (["unavailable"] as const) : []),
  ];
  for (const code of [...codes, ...always]) {
    const status = PROBLEMS[code].status;
    groups.set(status, [...(groups.get(status) ?? []), code]);
  }
  return Object.fromEntries([...groups.entries()].sort(([a], [b]) => a - b).map(([status, list]) => [String(status), problems(list)]));
}

const bodyErrors: ProblemCode[] = ["invalid_json", "invalid_address", "payload_too_large", "unsupported_media_type", "invalid_value", "unexpected_field"];

const walletAddressBodyContent = {
  required: true,
  description: `Exactly \`{ "walletAddress": ... }\`, as application/json, at most ${MAX_BODY_BYTES} bytes`,
  content: { "application/json": { schema: ref("WalletAddressBody"), example: { walletAddress: "0x52908400098527886E0F7030069857D2E4169EE7" } } },
};

/**
 * Every public operation needs no credential, and says so with the explicit empty requirement (`security: []`)
 * rather than by omission, which a client generator or linter cannot tell from "forgot".
 */
function withoutCredential(paths: Record<string, Record<string, Record<string, unknown>>>) {
  return Object.fromEntries(
    Object.entries(paths).map(([p, item]) => [p, Object.fromEntries(Object.entries(item).map(([m, op]) => [m, { ...op, security: [] }]))]),
  );
}

export function buildOpenApiDocument(): Record<string, unknown> {
  const addressParam = { name: "address", in: "path", required: true, schema: jsonSchema(walletAddressInput), description: "Wallet address, any case" };
  const idParam = (description: string) => ({ name: "id", in: "path", required: true, schema: jsonSchema(uuid), description });
  const shape = historyQuery.shape;

  return {
    openapi: "3.1.0",
    info: {
      title: "Gas sponsorship service",
      version: "1.0.0",
      description:
        "Sponsors the first gas of new wallets on a test network. Register a wallet, request a sponsorship, poll its status. " +
        "Every error is RFC 9457 problem details with a stable `code`; every response carries `X-Request-Id`. " +
        "A path that matches no endpoint answers 404 `not_found`; a path with a malformed percent-escape answers 400 `invalid_path`. " +
        "A request that is not well-formed HTTP/1.1 answers 400 `bad_request`, and one whose request line and headers exceed 16 KiB " +
        "(a long URL counts) 431 `headers_too_large`; the connection is then closed. An `Expect` other than `100-continue` answers 417 " +
        "`expectation_failed`.",
    },
    servers: [{ url: "/" }],
    paths: {
      ...withoutCredential({
        "/wallets/register": {
          post: {
            operationId: "registerWallet",
            summary: "Register a wallet (idempotent)",
            requestBody: walletAddressBodyContent,
            responses: {
              "201": success("Registered now", "Wallet", { Location: { schema: { type: "string" }, description: "/wallets/{address}" } }),
              "200": success("Already registered; lastSeenAt updated", "Wallet"),
              ...errorResponses([...bodyErrors, "ip_blocked", "rate_limited"]),
            },
          },
        },
        "/wallets/{address}": {
          get: {
            operationId: "getWallet",
            summary: "A registered wallet",
            parameters: [addressParam],
            responses: { "200": success("The wallet", "Wallet"), ...errorResponses(["invalid_address", "wallet_not_found"]) },
          },
        },
        "/wallets/{address}/history": {
          get: {
            operationId: "getWalletHistory",
            summary: "The wallet's sponsorship requests, newest first, paged by cursor",
            parameters: [
              addressParam,
              { name: "cursor", in: "query", required: false, schema: jsonSchema(shape.cursor) },
              { name: "limit", in: "query", required: false, schema: jsonSchema(shape.limit) },
            ],
            responses: {
              "200": success("One page", "HistoryPage"),
              ...errorResponses(["invalid_address", "wallet_not_found", "invalid_cursor", "invalid_limit"]),
            },
          },
        },
        "/sponsorship/request": {
          post: {
            operationId: "createSponsorshipRequest",
            summary: "Request a sponsorship for a registered wallet",
            description:
              "Checks, in order: body, pause (503 `sponsorships_paused`, Retry-After: 60), administrator IP block (403 `ip_blocked`), " +
              "global budget (429 `budget_exhausted`, Retry-After), IP block/limit, wallet registered, replay (same wallet and client " +
              "within the replay window: 200 with the existing request), wallet block/limit, open request (409), already sponsored (422). " +
              "An IPv6 client is limited and blocked as its /IPV6_PREFIX_LENGTH prefix (default /64).",
            requestBody: walletAddressBodyContent,
            responses: {
              "201": success("Created, status pending", "SponsorshipRequest", {
                Location: { schema: { type: "string" }, description: "/sponsorship/{id}" },
              }),
              "200": success("A replay within the replay window: the existing request, nothing created", "SponsorshipRequest"),
              ...errorResponses([
                ...bodyErrors,
                "ip_blocked",
                "wallet_not_registered",
                "request_open",
                "wallet_blocked",
                "already_sponsored",
                "rate_limited",
                "budget_exhausted",
                "sponsorships_paused",
              ]),
            },
          },
        },
        "/sponsorship/{id}": {
          get: {
            operationId: "getSponsorshipRequest",
            summary: "A sponsorship request with its wallet and relay attempts",
            description:
              "`ipAddress` and `userAgent` are answered only to the client the request came from (the same IPv4 address or IPv6 prefix); anyone else gets null for both, as from GET /sponsorship/tx/{hash}: the id is public data.",
            parameters: [idParam("Sponsorship request id")],
            responses: { "200": success("The request", "SponsorshipRequestDetail"), ...errorResponses(["invalid_id", "request_not_found"]) },
          },
        },
        "/sponsorship/tx/{hash}": {
          get: {
            operationId: "getSponsorshipRequestByTransactionHash",
            summary: "The sponsorship request that owns a relay transaction",
            description:
              "The record of GET /sponsorship/{id} with `ipAddress` and `userAgent` always null: a transaction hash is public, so it must not link a sponsored wallet to the requester's IP.",
            parameters: [{ name: "hash", in: "path", required: true, schema: jsonSchema(transactionHashParam) }],
            responses: {
              "200": success("The request, without the requester's IP and User-Agent", "SponsorshipRequestByTransaction"),
              ...errorResponses(["invalid_hash", "request_not_found"]),
            },
          },
        },
        "/relay/{id}": {
          get: {
            operationId: "getRelayTransaction",
            summary: "A relay transaction by its own id",
            parameters: [idParam("Relay transaction id (not the request id)")],
            responses: { "200": success("The relay record", "RelayTransaction"), ...errorResponses(["invalid_id", "relay_not_found"]) },
          },
        },
        "/health": {
          get: {
            operationId: "getHealth",
            summary: "Liveness and dependencies",
            responses: {
              ...errorResponses([]),
              "200": success("ok, or degraded when the chain, the worker or the treasury is unhealthy", "Health"),
              // Not a problem: /health answers its own report, with the database check down.
              "503": success("unavailable: the database does not answer", "Health", { "Retry-After": { $ref: "#/components/headers/Retry-After" } }),
            },
          },
        },
        "/faucet": {
          get: {
            operationId: "getFaucetStatus",
            summary: "What the faucet gives, on which network, whether it is serving, how long it usually takes",
            description:
              "Public and cheap: served from a snapshot at most a second old. `state` is, first match wins: `paused` or " +
              "`budget_exhausted` (an administrator's gate), `chain_unreachable` (no RPC endpoint answers, or the treasury cannot be read), " +
              "`paused` (the treasury is paused on-chain), `empty` (less than one sponsorship left), `low_funds` (fewer than " +
              "TREASURY_LOW_SPONSORSHIPS left; still serving), `operating`.",
            responses: { "200": success("The faucet's status", "FaucetStatus"), ...errorResponses([]) },
          },
        },
        "/openapi.json": {
          get: {
            operationId: "getOpenApiDocument",
            summary: "This document",
            responses: {
              "200": { description: "OpenAPI 3.1", headers: headerRefs, content: { "application/json": { schema: { type: "object" } } } },
              ...errorResponses([], { database: false }),
            },
          },
        },
      }),
      // Served by server.ts before Next (Prometheus text), for the administrator's bearer credential only.
      "/metrics": {
        get: {
          operationId: "getMetrics",
          summary: "Prometheus metrics of this web process (administrator only)",
          description: "Also served without a credential on 127.0.0.1:METRICS_PORT when that is set (not through this port).",
          security: [{ adminBearer: [] }],
          responses: {
            "200": {
              description: "Prometheus text exposition format",
              headers: headerRefs,
              content: { "text/plain": { schema: { type: "string" } } },
            },
            "401": {
              description: "`unauthorized`: no or a wrong `Authorization: Bearer <ADMIN_TOKEN>`",
              headers: { ...headerRefs, "WWW-Authenticate": { description: 'Bearer realm="metrics"', schema: { type: "string" } } },
              content: { "application/problem+json": { schema: ref("Problem") } },
            },
            "403": problems(["origin_not_allowed"]),
            "405": problems(["method_not_allowed"]),
            "429": problems(["rate_limited"]),
            "503": problems(["unavailable"]),
            "500": { description: "The metrics could not be collected", headers: headerRefs, content: { "text/plain": { schema: { type: "string" } } } },
          },
        },
      },
    },
    components: {
      securitySchemes: {
        adminBearer: { type: "http", scheme: "bearer", description: "The administrator's credential, ADMIN_TOKEN" },
      },
      schemas: componentSchemas(),
      headers: {
        "X-Request-Id": {
          description: "Echoes a client value of 1-128 characters of [A-Za-z0-9._-], otherwise a new id",
          schema: { type: "string" },
        },
        "Retry-After": { description: "Whole seconds to wait before a retry can succeed (>= 1)", schema: { type: "integer", minimum: 1 } },
      },
    },
  };
}

let cached: string | undefined;

/** The document as JSON text, built once per process. */
export function openApiJson(): string {
  cached ??= JSON.stringify(buildOpenApiDocument());
  return cached;
}
