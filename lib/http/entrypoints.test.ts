import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@/lib/log";
import { keptLog } from "@/test/kept-log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { apiRoutes } from "@/test/routes.generated";
import { ENTRYPOINTS_FILE } from "./entrypoints-adapter.mjs";
import { EntrypointTable, type EntrypointRoute } from "./entrypoints";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DIST = path.join(ROOT, ".next");
let table: EntrypointTable;

beforeAll(async () => {
  await buildIfStale(createLogger({ component: "entrypoints-test" }));
  table = EntrypointTable.read(DIST, ROOT);
}, 15 * 60_000);

const routeOf = (url: string, headers: Record<string, string> = {}) => table.match({ url, headers })?.route;

describe("the table the build writes (lib/http/entrypoints-adapter.mjs)", () => {
  it("lists every public route of app/(api) with its built entrypoint; the catch-all, /admin/... and /openapi.json stay Next's", () => {
    const built = (JSON.parse(readFileSync(path.join(DIST, ENTRYPOINTS_FILE), "utf8")) as { routes: EntrypointRoute[] }).routes;
    const expected = apiRoutes.map((r) => r.route).filter((r) => r !== "/[...path]" && r !== "/openapi.json" && !r.startsWith("/admin/"));
    expect(expected).toContain("/sponsorship/request");
    expect(built.map((r) => r.pathname).sort()).toEqual(expected.sort());
    expect(table.size).toBe(expected.length);
    // Each one loads, as the route it names.
    for (const route of expected) expect(routeOf(route.replace(/\[[^\]]+\]/g, "x"))).toBe(route);
  });
});

describe("which requests go straight to a route's entrypoint (lib/http/entrypoints.ts)", () => {
  it("takes a static route before a dynamic one at the same place, as Next does", () => {
    expect(routeOf("/wallets/register")).toBe("/wallets/register");
    expect(routeOf(`/wallets/0x${"ab".repeat(20)}`)).toBe("/wallets/[address]");
    expect(routeOf("/wallets/0xab/history")).toBe("/wallets/[address]/history");
    expect(routeOf("/sponsorship/request")).toBe("/sponsorship/request");
    expect(routeOf("/sponsorship/00000000-0000-0000-0000-000000000000")).toBe("/sponsorship/[id]");
    expect(routeOf("/sponsorship/tx/0xAB")).toBe("/sponsorship/tx/[hash]");
    expect(routeOf("/health?probe=1&x=%zz")).toBe("/health");
    expect(routeOf("/wallets/0xab/history?limit=5&cursor=00000000-0000-0000-0000-000000000000")).toBe("/wallets/[address]/history");
    // A dynamic segment takes any plain segment; what it means is the route's to judge (400 invalid_address).
    expect(routeOf("/wallets/not-an-address")).toBe("/wallets/[address]");
  });

  it("leaves to Next every request that does not name a route exactly as written", () => {
    for (const url of [
      "/health/",
      "//health",
      "/%68ealth",
      "/wallets/%30x00",
      "/HEALTH",
      "http://faucet.example/health",
      "*",
      "/",
      "/wallets/./history",
      "/wallets/../health",
      "/wallets//history",
      "/no/such/path",
      "/request",
      "/_next/static/chunks/app.js",
      // Next's own: the route module outside Next's server would read these as the path's values, or trim them.
      `/wallets/0x${"ab".repeat(20)}?nxtPaddress=0x${"cd".repeat(20)}`,
      "/wallets/0xab/history?limit=5&nxtIaddress=1",
      // ... however the query spells them (the route module's parser decodes names).
      `/wallets/0x${"ab".repeat(20)}?nxt%50address=0x${"cd".repeat(20)}`,
      `/wallets/0x${"ab".repeat(20)}?x=1&%6ExtPaddress=0x${"cd".repeat(20)}`,
      "/health?_rsc=1",
      `/wallets/0x${"ab".repeat(20)}.rsc`,
      // Served by Next on purpose (the adapter leaves them out).
      "/openapi.json",
      "/admin/requests",
      "/admin/wallets/0xab/block",
    ]) {
      expect([url, routeOf(url)]).toEqual([url, undefined]);
    }
  });

  it("leaves to Next a request that carries a header of Next's own (its client router's, or an internal one)", () => {
    for (const name of [
      "rsc",
      "next-router-prefetch",
      "next-router-state-tree",
      "next-action",
      "x-nextjs-data",
      "x-middleware-prefetch",
      "x-middleware-subrequest",
      "x-now-route-matches",
      "x-matched-path",
    ]) {
      expect([name, routeOf("/health", { [name]: "1" })]).toEqual([name, undefined]);
    }
    expect(routeOf("/health", { "x-request-id": "abc", "user-agent": "curl", nextish: "1" })).toBe("/health");
  });

  it("leaves a route to Next when its built entrypoint cannot be loaded (a table that does not match its build)", () => {
    const stale = new EntrypointTable(DIST, ROOT, [{ pathname: "/health", entrypoint: "server/app/(api)/no-such-route/route.js" }]);
    expect(stale.size).toBe(1);
    expect(stale.match({ url: "/health", headers: {} })).toBeUndefined();
    expect(stale.match({ url: "/health", headers: {} })).toBeUndefined();
  });

  it("dispatches nothing when the build's table is missing or unreadable", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "entrypoints-"));
    try {
      expect(EntrypointTable.read(dir, ROOT).size).toBe(0);
      writeFileSync(path.join(dir, ENTRYPOINTS_FILE), "{ not json");
      expect(EntrypointTable.read(dir, ROOT).size).toBe(0);
      writeFileSync(path.join(dir, ENTRYPOINTS_FILE), '{"routes": 3}');
      expect(EntrypointTable.read(dir, ROOT).match({ url: "/health", headers: {} })).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the adapter context a route's entrypoint is given (lib/http/entrypoints.ts)", () => {
  it("passes waitUntil, as Next's server does: the work runs on after the answer, close() awaits it, its failure is logged", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "entrypoints-"));
    try {
      // An entrypoint whose route leaves work to run after its answer (what after() hands to ctx.waitUntil).
      writeFileSync(
        path.join(dir, "route.js"),
        `exports.handler = async (req, res, ctx) => {
          ctx.waitUntil(new Promise((resolve) => setImmediate(resolve)).then(() => { res.afterRan = true; }));
          ctx.waitUntil(Promise.reject(new Error("late work failed")));
          res.answered = true;
        };`,
      );
      const { log, lines } = keptLog();
      const fake = new EntrypointTable(dir, ROOT, [{ pathname: "/health", entrypoint: "route.js" }], log);
      const dispatch = fake.match({ url: "/health", headers: {} })!.dispatch;
      const res = {} as { answered?: boolean; afterRan?: boolean };
      await dispatch({} as never, res as never);
      expect(res.answered).toBe(true);
      expect(res.afterRan).toBeUndefined();
      await fake.close();
      expect(res.afterRan).toBe(true);
      // The failure is logged, and did not escape (Vitest fails a run on an unhandled rejection).
      expect(lines.filter((l) => l.level === "error").map((l) => [l.msg, String((l.fields?.error as Error).message)])).toEqual([
        ["work after an API answer failed", "late work failed"],
      ]);
      // Handed over after the shutdown's wait began: it runs, nothing waits for it, and that is said.
      const late = {} as { answered?: boolean; afterRan?: boolean };
      await dispatch({} as never, late as never);
      await fake.close();
      expect(late.afterRan).toBeUndefined();
      expect(lines.filter((l) => l.level === "warn").map((l) => l.msg)).toEqual([
        "work after an API answer started during shutdown: the web server does not wait for it",
        "work after an API answer started during shutdown: the web server does not wait for it",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
