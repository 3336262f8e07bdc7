import type { IncomingMessage } from "node:http";

/**
 * The request line's target and the Host header as HTTP/1.1 defines them (RFC 9112 §3.2), read by server.ts before
 * anything routes the request, so that every form the open internet sends gets a problem answer or the answer of
 * its origin-form spelling, never an exception or an empty reply:
 * - origin-form (`/path?query`): served as it is;
 * - absolute-form (`http://host/path?query`, what a proxy-minded client sends): served as its origin-form, with the
 *   target's authority as the host (RFC 9112 §3.2.2: "MUST ignore the received Host header field");
 * - asterisk-form (`*`): `OPTIONS *` asks about the server itself (204 with `Allow`), any other method is a 400;
 * - anything else (a target that is not a URL, an absolute-form one with a user name, authority-form outside CONNECT)
 *   is a 400 `invalid_path`;
 * - a request with more than one Host header, or an HTTP/1.1 one without any (and without an absolute-form target),
 *   is a 400 `bad_request` (RFC 9112 §3.2: "MUST respond with a 400").
 */

/** What `OPTIONS *` answers: every method some path of the server takes. */
export const SERVER_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

export type TargetDecision =
  /** Served, with `url` as origin-form; `host` replaces the Host header when the target named one. */
  | { kind: "serve"; url: string; host?: string }
  /** `OPTIONS *`. */
  | { kind: "server-options" }
  | { kind: "invalid"; code: "invalid_path" | "bad_request"; detail: string };

const ABSOLUTE = /^https?:\/\//i;

/** How many Host header lines the client sent (Node keeps the first of several in `headers.host`). */
function hostLines(rawHeaders: readonly string[]): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.length === 4 && rawHeaders[i]!.toLowerCase() === "host") n++;
  return n;
}

export function decideTarget(req: Pick<IncomingMessage, "url" | "method" | "rawHeaders" | "httpVersionMajor" | "httpVersionMinor">): TargetDecision {
  const target = req.url ?? "/";
  const hosts = hostLines(req.rawHeaders);
  if (hosts > 1) return { kind: "invalid", code: "bad_request", detail: "The request carries more than one Host header" };
  if (target.charCodeAt(0) === 47 /* "/" */) {
    if (hosts === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor >= 1) {
      return { kind: "invalid", code: "bad_request", detail: "An HTTP/1.1 request needs a Host header" };
    }
    return { kind: "serve", url: target };
  }
  if (target === "*") {
    return req.method === "OPTIONS"
      ? { kind: "server-options" }
      : { kind: "invalid", code: "invalid_path", detail: "The request target * is only for OPTIONS; name a path" };
  }
  if (ABSOLUTE.test(target)) {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return { kind: "invalid", code: "invalid_path", detail: "The request target is not a valid URL" };
    }
    if (url.username || url.password) {
      return { kind: "invalid", code: "invalid_path", detail: "The request target may not carry a user name or password" };
    }
    // The path and query as the client wrote them (Next routes the raw spelling, not URL's normalised one).
    const afterScheme = target.indexOf("//") + 2;
    const pathStart = target.slice(afterScheme).search(/[/?]/);
    const rest = pathStart === -1 ? "" : target.slice(afterScheme + pathStart);
    return { kind: "serve", url: rest.startsWith("/") ? rest : `/${rest}`, host: url.host };
  }
  return { kind: "invalid", code: "invalid_path", detail: "The request target must be a path (/...) or an absolute http(s) URL" };
}
