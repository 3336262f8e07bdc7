import { existsSync, readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { log } from "@/lib/log";

/**
 * The API's route handlers, invoked through their built entrypoints: Next.js's documented adapter interface
 * ("Invoking Entrypoints": `handler(req, res, ctx)` of each of the build's `outputs.appRoutes`) instead of Next's
 * request handler. The route module is Next's own and does what it does under `next start`: it prepares the
 * request, runs the handler in its request scope, writes the Response. What is skipped is the server around it (its
 * router, the header, redirect and rewrite phases, the filesystem checks, the page pipeline), which no API path
 * uses: about a third of the web server's CPU per API request (docs/performance.md, issue 15).
 *
 * Only a path that names a route exactly comes here: a route's own path, or a dynamic route's with each `[segment]`
 * one plain path segment. A path with a percent-escape, an empty or dot segment or a trailing slash, and every path
 * no route names (pages, Next's files, the catch-all's 404), goes to Next, which routes it as before.
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
export type Dispatch = (req: IncomingMessage, res: ServerResponse) => Promise<unknown>;

/** The file in the build directory, as lib/http/entrypoints-adapter.mjs writes it. */
export const ENTRYPOINTS_FILE = "api-entrypoints.json";

/** A path segment that needs no decoding: RFC 3986's unreserved characters and sub-delimiters, ':' and '@'. */
const PLAIN_SEGMENT = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]+$/;
const DYNAMIC_SEGMENT = /^\[[^\].]+\]$/;

/** Next's precedence: at the first segment where two routes differ, the one with a static segment wins. */
function byPrecedence(a: Route, b: Route): number {
  for (let i = 0; i < Math.min(a.segments.length, b.segments.length); i++) {
    const staticA = a.segments[i] !== null;
    if (staticA !== (b.segments[i] !== null)) return staticA ? -1 : 1;
  }
  return 0;
}

export class EntrypointTable {
  private readonly routes: Route[];
  private readonly load: NodeJS.Require;
  private readonly requestMeta: { relativeProjectDir: string };

  /**
   * `distDir`: the build directory; `projectDir`: the Next project's (a route module finds its manifests from it,
   * relative to the process's working directory).
   */
  constructor(distDir: string, projectDir: string, routes: readonly EntrypointRoute[]) {
    this.load = createRequire(path.join(distDir, "package.json"));
    this.requestMeta = { relativeProjectDir: path.relative(process.cwd(), projectDir) || "." };
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

  /** The table the build wrote into `distDir`, or an empty one (everything goes to Next) when it wrote none. */
  static read(distDir: string, projectDir: string): EntrypointTable {
    const file = path.join(distDir, ENTRYPOINTS_FILE);
    const routes = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as { routes: EntrypointRoute[] }).routes : [];
    return new EntrypointTable(distDir, projectDir, routes);
  }

  get size(): number {
    return this.routes.length;
  }

  /** The route (its path as the build names it) that serves `url`, the request target as Node hands it over. */
  routeOf(url: string): string | undefined {
    return this.find(url)?.pathname;
  }

  /** The entrypoint that serves `url`, or undefined: Next routes it. */
  match(url: string): Dispatch | undefined {
    const route = this.find(url);
    if (!route) return undefined;
    const entrypoint = route.entrypoint === undefined ? (route.entrypoint = this.loadEntrypoint(route.file)) : route.entrypoint;
    if (!entrypoint) return undefined;
    return (req, res) => entrypoint.handler(req, res, { requestMeta: this.requestMeta });
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
    const query = url.indexOf("?");
    const segments = (query === -1 ? url : url.slice(0, query)).split("/").slice(1);
    if (!segments.every((s) => PLAIN_SEGMENT.test(s) && s !== "." && s !== "..")) return undefined;
    return this.routes.find((r) => r.segments.length === segments.length && r.segments.every((s, i) => s === null || s === segments[i]));
  }
}
