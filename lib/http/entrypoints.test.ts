import { readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@/lib/log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { apiRoutes } from "@/test/routes.generated";
import { ENTRYPOINTS_FILE as ADAPTER_FILE } from "./entrypoints-adapter.mjs";
import { ENTRYPOINTS_FILE, EntrypointTable, type EntrypointRoute } from "./entrypoints";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DIST = path.join(ROOT, ".next");

/** The app's API routes as the build names them, each with a made-up file (nothing is loaded here). */
const routes: EntrypointRoute[] = apiRoutes.map(({ route }) => ({ pathname: route, entrypoint: `server/app/(api)${route}/route.js` }));
const table = new EntrypointTable(
  DIST,
  ROOT,
  routes.filter((r) => !r.pathname.includes("[...")),
);

describe("which paths go straight to a route's entrypoint (lib/http/entrypoints.ts)", () => {
  it("takes a static route before a dynamic one at the same place, as Next does", () => {
    expect(table.routeOf("/wallets/register")).toBe("/wallets/register");
    expect(table.routeOf(`/wallets/0x${"ab".repeat(20)}`)).toBe("/wallets/[address]");
    expect(table.routeOf("/wallets/0xab/history")).toBe("/wallets/[address]/history");
    expect(table.routeOf("/sponsorship/request")).toBe("/sponsorship/request");
    expect(table.routeOf("/sponsorship/00000000-0000-0000-0000-000000000000")).toBe("/sponsorship/[id]");
    expect(table.routeOf("/sponsorship/tx/0xAB")).toBe("/sponsorship/tx/[hash]");
    expect(table.routeOf("/admin/wallets/0xab/block")).toBe("/admin/wallets/[address]/block");
    expect(table.routeOf("/health?probe=1&x=%zz")).toBe("/health");
    // A dynamic segment takes any plain segment; what it means is the route's to judge (400 invalid_address).
    expect(table.routeOf("/wallets/not-an-address")).toBe("/wallets/[address]");
  });

  it("leaves a route to Next when its built entrypoint cannot be loaded (a table that does not match its build)", () => {
    const stale = new EntrypointTable(DIST, ROOT, [{ pathname: "/health", entrypoint: "server/app/(api)/no-such-route/route.js" }]);
    expect(stale.routeOf("/health")).toBe("/health");
    expect(stale.match("/health")).toBeUndefined();
    expect(stale.match("/health")).toBeUndefined();
  });

  it("leaves to Next every path that does not name a route exactly as written", () => {
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
    ]) {
      expect([url, table.routeOf(url)]).toEqual([url, undefined]);
    }
  });
});

describe("the table the build writes (lib/http/entrypoints-adapter.mjs)", () => {
  beforeAll(async () => {
    await buildIfStale(createLogger({ component: "entrypoints-test" }));
  }, 15 * 60_000);

  it("lists every route of app/(api) with its built entrypoint, but the catch-all and /openapi.json (Next compresses it)", () => {
    expect(ADAPTER_FILE).toBe(ENTRYPOINTS_FILE);
    const built = (JSON.parse(readFileSync(path.join(DIST, ENTRYPOINTS_FILE), "utf8")) as { routes: EntrypointRoute[] }).routes;
    const expected = apiRoutes.map((r) => r.route).filter((r) => r !== "/[...path]" && r !== "/openapi.json");
    expect(built.map((r) => r.pathname).sort()).toEqual(expected.sort());
    const loaded = EntrypointTable.read(DIST, ROOT);
    expect(loaded.size).toBe(expected.length);
    // Each one loads, and exports the entrypoint's handler.
    for (const route of built) {
      expect(loaded.match(route.pathname.replace(/\[[^\]]+\]/g, "x"))).toBeTypeOf("function");
    }
  });
});
