import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PROBLEMS } from "@/lib/http/problem";
import { callApi, setupApiTestContext } from "@/test/api-client";

setupApiTestContext();

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown>; parameters?: { name: string; in: string }[] }>>;
  components: { schemas: Record<string, unknown> };
};

async function document(): Promise<Doc> {
  const answer = await callApi({ path: "/openapi.json" });
  expect(answer.status).toBe(200);
  expect(answer.headers.get("content-type")).toBe("application/json");
  return answer.json as Doc;
}

/** The endpoints of app/(api) as OpenAPI paths (admin routes and the catch-all are not part of the interface). */
function routePaths(): string[] {
  const root = path.join(import.meta.dirname, "..", "app", "(api)");
  const out: string[] = [];
  const walk = (dir: string, segments: string[]) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isFile() && entry.name === "route.ts") out.push("/" + segments.join("/"));
      if (entry.isDirectory() && entry.name !== "admin" && !entry.name.startsWith("[...")) {
        walk(path.join(dir, entry.name), [...segments, entry.name.replace(/^\[(\w+)\]$/, "{$1}")]);
      }
    }
  };
  walk(root, []);
  return out.sort();
}

describe("GET /openapi.json", () => {
  it("is an OpenAPI 3.1 document describing every endpoint of app/(api)", async () => {
    const doc = await document();
    expect(doc.openapi).toBe("3.1.0");
    // GET /metrics is answered by server.ts before Next (Prometheus text, for the administrator's bearer).
    expect(Object.keys(doc.paths).sort()).toEqual([...routePaths(), "/metrics"].sort());
  });

  it("declares the credential of every operation: none (security: []) for the public API, the administrator's bearer for /metrics", async () => {
    const doc = (await document()) as Doc & { paths: Record<string, Record<string, { security?: unknown }>> };
    for (const [p, operations] of Object.entries(doc.paths)) {
      for (const operation of Object.values(operations)) {
        expect(operation.security, p).toEqual(p === "/metrics" ? [{ adminBearer: [] }] : []);
      }
    }
  });

  it("names every path parameter of every templated path", async () => {
    const doc = await document();
    for (const [p, operations] of Object.entries(doc.paths)) {
      const names = [...p.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const operation of Object.values(operations)) {
        const declared = (operation.parameters ?? []).filter((x) => x.in === "path").map((x) => x.name);
        expect(declared.sort(), p).toEqual(names.sort());
      }
    }
  });

  it("resolves every $ref and carries the schemas of every response", async () => {
    const doc = await document();
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/(\w+)\/([\w-]+)"/g)];
    expect(refs.length).toBeGreaterThan(10);
    for (const [, section, name] of refs) {
      expect((doc.components as Record<string, Record<string, unknown>>)[section!]?.[name!], `${section}/${name}`).toBeDefined();
    }
    for (const name of [
      "Wallet",
      "SponsorshipRequest",
      "SponsorshipRequestDetail",
      "SponsorshipRequestByTransaction",
      "RelayTransaction",
      "HistoryPage",
      "Health",
      "Problem",
      "WalletAddressBody",
    ]) {
      expect(doc.components.schemas[name], name).toBeTypeOf("object");
    }
  });

  it("documents every error code of the API", async () => {
    const text = JSON.stringify(await document());
    for (const code of Object.keys(PROBLEMS)) {
      expect(text, code).toContain(`\`${code}\``);
    }
  });

  it("lists 503 only where the API can answer it: every operation that reads the database, not GET /openapi.json (built in memory)", async () => {
    const doc = await document();
    for (const [p, operations] of Object.entries(doc.paths)) {
      for (const operation of Object.values(operations)) {
        if (p === "/openapi.json") expect(operation.responses["503"], p).toBeUndefined();
        else expect(operation.responses["503"], p).toBeDefined();
      }
    }
  });

  it("describes the request bodies as strict objects with the address pattern", async () => {
    const doc = await document();
    expect(doc.components.schemas.WalletAddressBody).toMatchObject({
      type: "object",
      additionalProperties: false,
      required: ["walletAddress"],
      properties: { walletAddress: { type: "string", maxLength: 42, pattern: "^0x[0-9a-fA-F]{40}$" } },
    });
  });
});
