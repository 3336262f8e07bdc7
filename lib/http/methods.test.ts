import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { apiRoutes } from "@/test/routes.generated";
import { decideMethod, isOperatorPath, routedPath } from "./methods";

/** Every page.tsx under app/(web) as a path (route groups dropped, a dynamic segment filled in). */
function pagePaths(dir: string, prefix = ""): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isFile() && entry.name === "page.tsx") found.push(prefix || "/");
    if (entry.isDirectory() && !entry.name.startsWith("_")) {
      const segment = /^\(.*\)$/.test(entry.name) ? "" : `/${/^\[.*\]$/.test(entry.name) ? "x" : entry.name}`;
      found.push(...pagePaths(path.join(dir, entry.name), prefix + segment));
    }
  }
  return found;
}

describe("which methods a path answers (lib/http/methods.ts)", () => {
  it("knows every page of app/(web): GET and HEAD go to Next, other methods are answered 405", () => {
    const pages = pagePaths(path.resolve(import.meta.dirname, "../../app/(web)"));
    expect(pages).toContain("/dashboard/requests/x");
    for (const page of pages) {
      expect([page, decideMethod("GET", page).kind, decideMethod("HEAD", page).kind]).toEqual([page, "next", "next"]);
      expect([page, decideMethod("PUT", page).kind]).toEqual([page, "not-allowed"]);
      expect([page, decideMethod("OPTIONS", page).kind]).toEqual([page, "page-options"]);
    }
  });

  it("judges a page's path as Next routes it: a trailing slash, percent-escapes, a query", () => {
    for (const url of ["/request/", "/%72equest", "/request?id=1", "/dashboard/controls/"]) {
      expect([url, decideMethod("PUT", url).kind]).toEqual([url, "not-allowed"]);
    }
    expect(decideMethod("OPTIONS", "/request/").kind).toBe("page-options");
  });

  it("reads a route handler's whole URL by its path (the administrator's routes are told by it, however spelt)", () => {
    expect(routedPath("http://faucet.example/%61dmin/resume")).toBe("/admin/resume");
    expect(routedPath("http://faucet.example/admin/pause/")).toBe("/admin/pause");
    expect(routedPath("/%61dmin/resume?x=1")).toBe("/admin/resume");
  });

  it("reads whatever follows the first slash as the path, never as a host: //a:b and //[ are paths, not URLs that throw", () => {
    for (const url of ["//a:b", "//[", "//a:99999", "//request", "//sponsorship/request"]) {
      expect([url, decideMethod("POST", url).kind]).toEqual([url, "next"]);
    }
  });

  it("lets the dashboard's server actions POST to its pages, and no other page", () => {
    expect(decideMethod("POST", "/dashboard/requests/x").kind).toBe("next");
    expect(decideMethod("POST", "/request")).toEqual({ kind: "not-allowed", allow: "GET, HEAD, OPTIONS" });
  });

  it("leaves every API route to its handler, and hands it a method Next cannot dispatch as unrouted", () => {
    for (const { route } of apiRoutes) {
      const sample = route.replace(/\[\.\.\.[^\]]+\]/, "no/such/path").replace(/\[[^\]]+\]/g, "x");
      for (const method of ["GET", "POST", "DELETE", "OPTIONS"]) expect([sample, decideMethod(method, sample).kind]).toEqual([sample, "next"]);
      expect([sample, decideMethod("TRACE", sample).kind]).toEqual([sample, "unrouted"]);
    }
  });
});

describe("the operator's paths (isOperatorPath)", () => {
  it("are /admin and /dashboard with everything under them, as Next routes them, and nothing that only starts alike", () => {
    for (const url of ["/admin", "/admin/resume", "//ADMIN/pause", "/%61dmin/resume", "/dashboard", "/Dashboard/controls?x=1", "/dashboard/"])
      expect(isOperatorPath(routedPath(url)), url).toBe(true);
    for (const url of ["/", "/administrator", "/dashboards", "/sponsorship/request", "/request?next=/admin", "/health"])
      expect(isOperatorPath(routedPath(url)), url).toBe(false);
  });
});
