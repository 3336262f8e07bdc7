/**
 * Which methods a path answers, for what Next.js itself would get wrong (decisions.md, "Wire format": a method a
 * route does not support is `405` with `Allow`). Next renders a page for any method (a PUT or a PROPFIND on
 * `/request` answers the page, 200), answers OPTIONS on a page 400, and answers a method outside its seven
 * (TRACE, PROPFIND, QUERY, ...) on a route handler with an empty 400: it never calls the handler, so lib/http/route.ts
 * cannot answer it. server.ts asks this before Next and answers those itself, or hands the request to the route
 * handler as OPTIONS with UNROUTED_METHOD_HEADER, which lib/http/route.ts answers 405 with the route's own `Allow`.
 */

/** The methods Next.js dispatches to a route handler (`HTTP_METHODS` in next/dist/server/web/http.js). */
const NEXT_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/**
 * Set by server.ts (any client-sent header of this name is deleted first) when it hands a route handler a method
 * Next cannot dispatch, as OPTIONS: its value is the method the client sent.
 */
export const UNROUTED_METHOD_HEADER = "x-unrouted-method";

/**
 * The pages (app/(web)/**\/page.tsx, lib/http/methods.test.ts keeps this in step) and Next's own files. The dashboard
 * takes POSTs: its forms are server actions, posted to the page they are on.
 */
function pageMethods(pathname: string): readonly string[] | undefined {
  if (pathname.startsWith("/_next/")) return ["GET", "HEAD"];
  if (pathname === "/" || pathname === "/request") return ["GET", "HEAD"];
  if (/^\/dashboard(\/(wallets|controls|webhooks|requests(\/[^/]+)?))?$/.test(pathname)) return ["GET", "HEAD", "POST"];
  return undefined;
}

export type MethodDecision =
  /** Next serves it as it is. */
  | { kind: "next" }
  /** A route handler serves the path but Next cannot dispatch the method: hand it over as OPTIONS, marked. */
  | { kind: "unrouted" }
  /** A page: OPTIONS is answered 204 and any method outside `allow` 405, both with `Allow`. */
  | { kind: "page-options"; allow: string }
  | { kind: "not-allowed"; allow: string };

/**
 * The path as Next routes it, of a request target (`req.url` in server.ts, which has made an absolute-form one
 * origin-form: lib/http/request-target.ts) or of a whole URL (`request.url` in a route handler, lib/http/route.ts):
 * percent-escapes decoded (Next also tries the decoded path: `/%72equest` is the page), a trailing slash dropped
 * (`skipTrailingSlashRedirect` serves `/request/` as `/request`). A target is read as a path whatever follows its
 * first slash (`//a:b` is the path `//a:b`, not a host `a:b`). server.ts has already answered a path whose escapes
 * do not decode; one is judged as written.
 */
export function routedPath(url: string): string {
  let pathname: string;
  try {
    pathname = new URL(url.startsWith("/") ? `http://localhost${url}` : url).pathname;
  } catch {
    pathname = url.split("?")[0]!;
  }
  try {
    pathname = decodeURIComponent(pathname);
  } catch {
    // Judged as written.
  }
  return pathname.length > 1 ? pathname.replace(/\/+$/, "") || "/" : pathname;
}

/**
 * Whether a routed path (routedPath) is the operator's: the administrator's JSON routes under `/admin` or the
 * dashboard's pages (and their server actions) under `/dashboard`, repeated slashes and case aside. CORS_ORIGINS
 * never opens these (server.ts, lib/http/route.ts).
 */
export function isOperatorPath(pathname: string): boolean {
  return /^\/+(?:admin|dashboard)(?:\/|$)/i.test(pathname);
}

/** `url` is the request target as Node hands it over (`req.url`); `pathname` its routedPath, when already read. */
export function decideMethod(method: string, url: string, pathname = routedPath(url)): MethodDecision {
  const page = pageMethods(pathname);
  if (!page) return NEXT_METHODS.has(method) ? { kind: "next" } : { kind: "unrouted" };
  if (page.includes(method)) return { kind: "next" };
  const allow = [...page, "OPTIONS"].join(", ");
  return method === "OPTIONS" ? { kind: "page-options", allow } : { kind: "not-allowed", allow };
}
