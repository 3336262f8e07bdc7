import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "@/lib/config";
import { setAppContextForTests } from "@/lib/http/app-context";
import { CLIENT_IP_HEADER } from "@/lib/http/client-ip";
import type { NextRouteHandler } from "@/lib/http/route";
import { parseCidr } from "@/lib/sponsorship/client-identity";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import * as ipBlock from "./ip-blocks/[id]/route";
import * as ipBlocks from "./ip-blocks/route";
import * as pause from "./pause/route";
import * as resume from "./resume/route";
import * as signIn from "./sign-in/route";

/**
 * Bad input never yields a 500 on the operator's routes either (issue 10): random CIDR text, reasons, bodies and
 * ids at POST /admin/ip-blocks, DELETE /admin/ip-blocks/:id, POST /admin/pause and /admin/resume. Every answer is
 * a success of the route's shape or a problem+json 4xx, and the blocks table holds exactly the 201s.
 */

const ADMIN_TOKEN = "controls-property-admin-token-0123456789abcdef";
let t: TestDatabase;
let cookie: string;

function call(handler: NextRouteHandler, init: { method: string; body?: string; contentType?: string; params?: Record<string, string> }) {
  const headers = new Headers({ [CLIENT_IP_HEADER]: "192.0.2.10", cookie });
  if (init.contentType) headers.set("content-type", init.contentType);
  const request = new Request("http://127.0.0.1:3000/admin/x", { method: init.method, headers, body: init.body });
  return handler(request, { params: Promise.resolve(init.params ?? {}) });
}

beforeAll(async () => {
  t = await createTestDatabase();
  setAppContextForTests({ db: t.db, config: parseConfig({ ADMIN_TOKEN, LOG_LEVEL: "silent" }) });
  cookie = "";
  const res = await call(signIn.POST, { method: "POST", body: JSON.stringify({ token: ADMIN_TOKEN }), contentType: "application/json" });
  expect(res.status).toBe(200);
  cookie = res.headers.get("set-cookie")!.split(";")[0]!;
});
afterAll(async () => {
  setAppContextForTests({});
  await t?.drop();
});

const cidrLike = fc.oneof(
  fc.ipV4(),
  fc.ipV6(),
  fc.tuple(fc.ipV4(), fc.integer({ min: -2, max: 40 })).map(([a, n]) => `${a}/${n}`),
  fc.tuple(fc.ipV6(), fc.integer({ min: -2, max: 140 })).map(([a, n]) => `${a}/${n}`),
  fc.string({ unit: "grapheme", maxLength: 70 }),
);
const anyJson = fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.boolean(), fc.array(fc.string(), { maxLength: 2 }));
const body = fc.oneof(
  fc.record({ cidr: cidrLike, reason: fc.string({ maxLength: 1_100 }) }).map((b) => JSON.stringify(b)),
  fc.dictionary(fc.constantFrom("cidr", "reason", "extra"), anyJson).map((b) => JSON.stringify(b)),
  fc.string({ maxLength: 50 }),
);

describe("the operator's routes under random input", () => {
  it("parseCidr never throws, and what it answers reads back as itself", () => {
    fc.assert(
      fc.property(cidrLike, (text) => {
        const parsed = parseCidr(text);
        if (parsed !== undefined) expect(parseCidr(parsed)).toBe(parsed);
      }),
      { numRuns: 2_000 },
    );
  });

  it("answers every random call with a success of its shape or a 4xx problem, and stores exactly the created blocks", async () => {
    let created = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          body.map((b) => ({ route: "block" as const, b })),
          fc.oneof(fc.uuid(), fc.string({ maxLength: 40 })).map((id) => ({ route: "lift" as const, b: id })),
          body.map((b) => ({ route: "pause" as const, b })),
          fc.option(body, { nil: undefined }).map((b) => ({ route: "resume" as const, b })),
        ),
        async ({ route, b }) => {
          const res =
            route === "block"
              ? await call(ipBlocks.POST, { method: "POST", body: b, contentType: "application/json" })
              : route === "lift"
                ? await call(ipBlock.DELETE, { method: "DELETE", params: { id: b ?? "" } })
                : route === "pause"
                  ? await call(pause.POST, { method: "POST", body: b, contentType: "application/json" })
                  : await call(resume.POST, { method: "POST", body: b, contentType: b === undefined ? undefined : "application/json" });
          expect(res.status, await res.clone().text()).toBeLessThan(500);
          if (res.status >= 400) {
            expect(res.headers.get("content-type")).toBe("application/problem+json");
            expect(((await res.json()) as { code?: unknown }).code).toEqual(expect.any(String));
          } else if (route === "block") {
            expect(res.status).toBe(201);
            const json = (await res.json()) as { cidr: string };
            expect(parseCidr(json.cidr)).toBe(json.cidr);
            created++;
          }
        },
      ),
      { numRuns: 300 },
    );
    const [row] = await t.db.$client<{ n: number }[]>`SELECT count(*)::int AS n FROM ip_blocks`;
    expect(row!.n).toBe(created);
  });
});
