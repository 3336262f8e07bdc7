import { existsSync, readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { log } from "@/lib/log";
import { ENTRYPOINTS_FILE } from "./entrypoints-adapter.mjs";

/**
 * The public API's route handlers, invoked through their built entrypoints: Next.js's documented adapter interface
 * ("Invoking Entrypoints": `handler(req, res, ctx)` of each of the build's `outputs.appRoutes`) instead of Next's
 * request handler. The route module is Next's own and does what it does under `next start`: it prepares the
 * request, runs the handler in its request scope, writes the Response. What is skipped is the server around it (its
 * router, the header, redirect and rewrite phases, the filesystem checks, the page pipeline), which no API path
 * uses: about a third of the web server's CPU per API request (docs/performance.md, "Session 16").
 *
 * Only a request that names a route exactly comes here: a route's own path, or a dynamic route's with each
 * `[segment]` one plain path segment. Everything else goes to Next, which routes it as before:
 * - a path with a percent-escape, an empty or dot segment, a trailing slash, or a segment ending in `.rsc` (the
 *   route module would take that suffix off a dynamic segment; Next's router does not);
 * - a query that uses a name Next reserves for its own routing (`nxtP...`, `nxtI...`: outside Next's server the
 *   route module would read them as the dynamic segments' values, over the path's; Next's router drops them);
 * - every path no route names (pages, Next's files, the catch-all's 404; the administrator's routes and
 *   `/openapi.json`, which the adapter leaves to Next).
 * The caller strips Next's internal request headers first, as Next's router does (server.ts).
 *
 * The table comes from the build (lib/http/entrypoints-adapter.mjs); a build without one dispatches nothing here.
 */

type Entrypoint = {
  handler: (req: IncomingMessage, res: ServerResponse, ctx: { requestMeta: { relativeProjectDir: string } }) => Promise<unknown>;
};

type Route = {
  pathname: string;
  /** The route's path in segments; null for a dynamic segment. */
  segments: readonly (string | null)[];
  file: string;
  /** Loaded at the route's first request; null when it could not be (the route then stays Next's). */
  entrypoint?: Entrypoint | null;
};

export type EntrypointRoute = { pathname: string; entrypoint: string };
export type EntrypointMatch = {
  /** The route's path as the build names it (`/wallets/[address]`). */
  route: string;
  dispatch: (req: IncomingMessage, res: ServerResponse) => Promise<unknown>;
};

/** A path segment that needs no decoding: RFC 3986's unreserved characters and sub-delimiters, ':' and '@'. */
const PLAIN_SEGMENT = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]+$/;
const DYNAMIC_SEGMENT = /^\[[^\].]+\]$/;
/** Query names Next's routing reads (NEXT_QUERY_PARAM_PREFIX, NEXT_INTERCEPTION_MARKER_PREFIX, its locale, `_rsc`). */
const NEXT_QUERY = /(?:^|&)(?:nxtP|nxtI|nextInternalLocale|_rsc)/;

/** Longer routes after shorter; then Next's precedence: at the first segment where two differ, a static one wins. */
function byPrecedence(a: Route, b: Route): number {
  if (a.segments.length !== b.segments.length) return a.segments.length - b.segments.length;
  for (let i = 0; i < a.segments.length; i++) {
    const staticA = a.segments[i] !== null;
    if (staticA !== (b.segments[i] !== null)) return staticA ? -1 : 1;
  }
  return 0;
}

export class EntrypointTable {
  private readonly routes: Route[];
  private readonly load: NodeJS.Require;
  private readonly relativeProjectDir: string;

  /**
   * `distDir`: the build directory; `projectDir`: the Next project's (a route module finds its manifests from it,
   * relative to the process's working directory).
   */
  constructor(distDir: string, projectDir: string, routes: readonly EntrypointRoute[]) {
    this.load = createRequire(path.join(distDir, "package.json"));
    this.relativeProjectDir = path.relative(process.cwd(), projectDir) || ".";
    this.routes = routes
      .map((r) => ({
        pathname: r.pathname,
        segments: r.pathname
          .split("/")
          .slice(1)
          .map((s) => (DYNAMIC_SEGMENT.test(s) ? null : s)),
        file: path.join(distDir, r.entrypoint),
      }))
      .sort(byPrecedence);
  }

  /** The table the build wrote into `distDir`; an empty one (everything goes to Next) when it wrote none readable. */
  static read(distDir: string, projectDir: string): EntrypointTable {
    const file = path.join(distDir, ENTRYPOINTS_FILE);
    let routes: EntrypointRoute[] = [];
    if (existsSync(file)) {
      try {
        const table = JSON.parse(readFileSync(file, "utf8")) as { routes?: unknown };
        if (!Array.isArray(table.routes)) throw new Error("no routes");
        routes = (table.routes as Partial<EntrypointRoute>[]).filter(
          (r): r is EntrypointRoute => typeof r.pathname === "string" && typeof r.entrypoint === "string",
        );
      } catch (error) {
        log.warn("the build's API entrypoint table cannot be read: Next serves every route", { file, error });
      }
    }
    return new EntrypointTable(distDir, projectDir, routes);
  }

  get size(): number {
    return this.routes.length;
  }

  /** The route's entrypoint that serves `url` (the request target as Node hands it over), or undefined: Next's. */
  match(url: string): EntrypointMatch | undefined {
    const route = this.find(url);
    if (!route) return undefined;
    const entrypoint = route.entrypoint === undefined ? (route.entrypoint = this.loadEntrypoint(route.file)) : route.entrypoint;
    if (!entrypoint) return undefined;
    const relativeProjectDir = this.relativeProjectDir;
    // A request meta object of its own each time: the route module writes into it (initURL, initQuery, ...).
    return { route: route.pathname, dispatch: (req, res) => entrypoint.handler(req, res, { requestMeta: { relativeProjectDir } }) };
  }

  /** A table that does not match its build (a file gone, no handler) costs nothing but the dispatch: said once. */
  private loadEntrypoint(file: string): Entrypoint | null {
    try {
      const loaded = this.load(file) as Partial<Entrypoint>;
      if (typeof loaded.handler === "function") return loaded as Entrypoint;
      log.warn("an API route's built entrypoint exports no handler: Next serves the route", { file });
    } catch (error) {
      log.warn("an API route's built entrypoint could not be loaded: Next serves the route", { file, error });
    }
    return null;
  }

  private find(url: string): Route | undefined {
    if (url.charCodeAt(0) !== 47 /* "/" */) return undefined;
    const q = url.indexOf("?");
    if (q !== -1 && NEXT_QUERY.test(url.slice(q + 1))) return undefined;
    const segments = (q === -1 ? url : url.slice(0, q)).split("/").slice(1);
    if (!segments.every((s) => PLAIN_SEGMENT.test(s) && s !== "." && s !== ".." && !s.endsWith(".rsc"))) return undefined;
    return this.routes.find((r) => r.segments.length === segments.length && r.segments.every((s, i) => s === null || s === segments[i]));
  }
}
