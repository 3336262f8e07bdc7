import { existsSync, readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import { log as defaultLog, type Logger } from "@/lib/log";
import { ENTRYPOINTS_FILE } from "./entrypoints-adapter.mjs";

/**
 * The public API's route handlers, invoked through their built entrypoints: Next.js's documented adapter interface
 * ("Invoking Entrypoints": `handler(req, res, ctx)` of each of the build's `outputs.appRoutes`) instead of Next's
 * request handler. The route module is Next's own, run as a deployment adapter runs it: it prepares the request,
 * runs the handler in its request scope, writes the Response. What is skipped is Next's server around it: its router
 * (the header, redirect and rewrite phases, the filesystem checks), its handling of its own client router's requests,
 * its compression and the page pipeline, none of which a public API request needs: about a third of the web
 * server's CPU per API request (docs/performance.md, "Session 16").
 *
 * Only a request that names a public route exactly, and carries nothing of Next's own, comes here; everything else
 * goes to Next, which serves it as before:
 * - a path with a percent-escape, an empty or dot segment, a trailing slash, or a segment ending in `.rsc` (the
 *   route module would take that suffix off a dynamic segment; Next's router does not);
 * - a query with a name Next reserves for its routing (`nxtP...`, `nxtI...`, `nextInternalLocale`, `_rsc`), as the
 *   query parser decodes it: outside Next's server the route module reads `nxtP<name>` as the value of the dynamic
 *   segment `<name>`, over the path's; Next's router drops it;
 * - a request header of Next's (`rsc`, `next-*`, `x-next*`, `x-middleware-*`, `x-now-*`, `x-matched-path`): its
 *   client router's requests, which Next answers itself, and internal headers, which Next's router strips;
 * - every path no public route names (pages, Next's files, the catch-all's 404, and the administrator's routes and
 *   `/openapi.json`, which the adapter leaves to Next for their compression).
 * So a public API request is answered as Next's router answers it, but uncompressed and with `Vary: Origin` alone
 * (server.test.ts compares them request by request).
 *
 * The table comes from the build (lib/http/entrypoints-adapter.mjs); a build without one dispatches nothing here.
 */

type Entrypoint = {
  handler: (
    req: IncomingMessage,
    res: ServerResponse,
    ctx: { waitUntil: (promise: Promise<unknown>) => void; requestMeta: { relativeProjectDir: string } },
  ) => Promise<unknown>;
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
const NEXT_QUERY = /^(?:nxtP|nxtI|nextInternalLocale|_rsc)/;
/** Request headers Next's server acts on or strips (its client router's, its internal ones). */
const NEXT_HEADER = /^(?:rsc|next-|x-next|x-middleware-|x-now-|x-matched-path)/;

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
  /** Work a route module left to run after its answer (`after()`, a pending revalidation): awaited by `close()`. */
  private readonly pending = new Set<Promise<unknown>>();
  private closing = false;
  /**
   * The adapter's `ctx.waitUntil`, as Next's own server gives it: the promise runs on after the answer and is awaited
   * at shutdown; its failure is logged (it has no answer left to fail). Without it `after()` throws. Work handed over
   * once the shutdown's wait has begun still runs, but nothing waits for it: that is said.
   */
  private readonly waitUntil = (promise: Promise<unknown>): void => {
    const tracked = Promise.resolve(promise)
      .catch((error: unknown) => this.log.error("work after an API answer failed", { error }))
      .finally(() => this.pending.delete(tracked));
    if (this.closing) this.log.warn("work after an API answer started during shutdown: the web server does not wait for it");
    else this.pending.add(tracked);
  };

  /**
   * `distDir`: the build directory; `projectDir`: the Next project's (a route module finds its manifests from it,
   * relative to the process's working directory).
   */
  constructor(
    distDir: string,
    projectDir: string,
    routes: readonly EntrypointRoute[],
    private readonly log: Logger = defaultLog,
  ) {
    this.load = createRequire(path.join(distDir, "package.json"));
    // Spelt so that it never equals the key under which Next's own server shares its context with the route modules
    // (path.relative(cwd, dir), "" from the project's directory): the module then always runs as under an adapter,
    // whichever directory the process started in and whether Next's server has served a request before.
    this.relativeProjectDir = `./${path.relative(process.cwd(), projectDir)}`;
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
  static read(distDir: string, projectDir: string, log: Logger = defaultLog): EntrypointTable {
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
    return new EntrypointTable(distDir, projectDir, routes, log);
  }

  get size(): number {
    return this.routes.length;
  }

  /** The route's entrypoint that serves a request (its target as Node hands it over), or undefined: Next's. */
  match(req: Pick<IncomingMessage, "url" | "headers">): EntrypointMatch | undefined {
    const route = this.find(req.url ?? "/");
    if (!route || Object.keys(req.headers).some((name) => NEXT_HEADER.test(name))) return undefined;
    const entrypoint = route.entrypoint === undefined ? (route.entrypoint = this.loadEntrypoint(route.file)) : route.entrypoint;
    if (!entrypoint) return undefined;
    const relativeProjectDir = this.relativeProjectDir;
    // A request meta object of its own each time: the route module writes into it (initURL, initQuery, ...).
    const waitUntil = this.waitUntil;
    return { route: route.pathname, dispatch: (req, res) => entrypoint.handler(req, res, { waitUntil, requestMeta: { relativeProjectDir } }) };
  }

  /** The web server's shutdown: once the work handed to `waitUntil` has ended; what is handed over later is not awaited. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.pending);
  }

  /** A table that does not match its build (a file gone, no handler) costs nothing but the dispatch: said once. */
  private loadEntrypoint(file: string): Entrypoint | null {
    try {
      const loaded = this.load(file) as Partial<Entrypoint>;
      if (typeof loaded.handler === "function") return loaded as Entrypoint;
      this.log.warn("an API route's built entrypoint exports no handler: Next serves the route", { file });
    } catch (error) {
      this.log.warn("an API route's built entrypoint could not be loaded: Next serves the route", { file, error });
    }
    return null;
  }

  private find(url: string): Route | undefined {
    if (url.charCodeAt(0) !== 47 /* "/" */) return undefined;
    const q = url.indexOf("?");
    if (q !== -1) for (const name of new URLSearchParams(url.slice(q + 1)).keys()) if (NEXT_QUERY.test(name)) return undefined;
    const segments = (q === -1 ? url : url.slice(0, q)).split("/").slice(1);
    if (!segments.every((s) => PLAIN_SEGMENT.test(s) && s !== "." && s !== ".." && !s.endsWith(".rsc"))) return undefined;
    return this.routes.find((r) => r.segments.length === segments.length && r.segments.every((s, i) => s === null || s === segments[i]));
  }
}
