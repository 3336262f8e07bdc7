import http from "node:http";
import https from "node:https";

/**
 * A `fetch` for viem's HTTP transport (`fetchFn`) over node:http(s) with keep-alive connections, for processes
 * that make many small JSON-RPC calls (the worker). Measured here against anvil: about 0.2 ms of CPU per request,
 * against 0.7-1.0 ms for Node's built-in fetch (undici, WHATWG streams), for the same keep-alive connection reuse.
 *
 * Only what viem's HTTP client uses is provided: a string body, the request's headers, method and abort signal;
 * the answer's status, `headers.get`, and `text()` (set the transport's `maxResponseBodySize: false`: the size cap
 * is enforced here, while reading). A failure to connect or a connection cut mid-answer rejects with the socket's
 * error (ECONNREFUSED, ECONNRESET...), which viem reports as an HttpRequestError without a status, like fetch's.
 */

export type NodeFetchOptions = {
  /** Concurrent connections per origin (keep-alive). Default 8. */
  maxSockets?: number;
  /** Larger answers are refused (the connection is closed). Default 64 MiB. */
  maxResponseBytes?: number;
};

type HeaderValues = Record<string, string | string[] | undefined>;

class NodeResponse {
  readonly ok: boolean;
  readonly body = null;
  readonly headers: { get: (name: string) => string | null; forEach: (fn: (value: string, key: string) => void) => void };
  constructor(
    readonly status: number,
    readonly statusText: string,
    headers: HeaderValues,
    private readonly content: string,
  ) {
    this.ok = status >= 200 && status < 300;
    const value = (v: string | string[] | undefined) => (v === undefined ? null : Array.isArray(v) ? v.join(", ") : v);
    this.headers = {
      get: (name) => value(headers[name.toLowerCase()]),
      forEach: (fn) => {
        for (const [key, v] of Object.entries(headers)) if (v !== undefined) fn(value(v)!, key);
      },
    };
  }

  async text(): Promise<string> {
    return this.content;
  }

  async json(): Promise<unknown> {
    return JSON.parse(this.content);
  }
}

/** Idle keep-alive sockets are closed after this long. */
export const IDLE_SOCKET_MS = 4_000;

/** Connections per endpoint by default: calls beyond them wait for one, within their timeout. */
export const MAX_SOCKETS = 8;

export function createNodeFetch(options: NodeFetchOptions = {}): typeof fetch {
  const maxSockets = options.maxSockets ?? MAX_SOCKETS;
  const maxBytes = options.maxResponseBytes ?? 64 * 1024 * 1024;
  // Idle keep-alive sockets are closed after IDLE_SOCKET_MS (as the built-in fetch does), below the keep-alive
  // timeout of common servers and proxies, so a socket is rarely reused just as the server closes it.
  const agents = {
    "http:": new http.Agent({ keepAlive: true, maxSockets, timeout: IDLE_SOCKET_MS }),
    "https:": new https.Agent({ keepAlive: true, maxSockets, timeout: IDLE_SOCKET_MS }),
  };

  const nodeFetch = (input: string | URL | Request, init: RequestInit = {}): Promise<NodeResponse> =>
    new Promise((resolve, reject) => {
      const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url);
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        reject(new TypeError(`unsupported protocol ${url.protocol}`));
        return;
      }
      if (init.body !== undefined && init.body !== null && typeof init.body !== "string") {
        reject(new TypeError("only string bodies are supported"));
        return;
      }
      const body = init.body ?? undefined;
      const headers: Record<string, string> = {};
      const given = init.headers;
      // viem passes a plain object; anything else goes through Headers.
      if (given && !(given instanceof Headers) && !Array.isArray(given)) for (const [k, v] of Object.entries(given)) headers[k.toLowerCase()] = v;
      else new Headers(given).forEach((v, k) => (headers[k] = v));
      if (body !== undefined) headers["content-length"] = String(Buffer.byteLength(body));

      const signal = init.signal ?? undefined;
      const send = (retried: boolean) => {
        const request = (url.protocol === "https:" ? https : http).request(
          url,
          { method: init.method ?? "GET", headers, agent: agents[url.protocol as "http:" | "https:"] },
          (response) => {
            const chunks: Buffer[] = [];
            let size = 0;
            response.on("data", (chunk: Buffer) => {
              size += chunk.length;
              if (size <= maxBytes) chunks.push(chunk);
              else {
                reject(new Error(`response larger than ${maxBytes} bytes`));
                request.destroy();
              }
            });
            response.on("end", () => {
              if (size > maxBytes) return;
              resolve(new NodeResponse(response.statusCode ?? 0, response.statusMessage ?? "", response.headers, Buffer.concat(chunks, size).toString("utf8")));
            });
            response.on("error", reject);
            response.on("close", () => {
              if (!response.complete) reject(new Error("aborted: the connection closed before the answer was complete"));
            });
          },
        );
        request.on("error", (error: NodeJS.ErrnoException) => {
          // A kept-alive socket the server closed while it was idle fails at once with ECONNRESET: nothing was
          // processed, so the request is sent again, once, on a new connection (Node's documented pattern).
          if (request.reusedSocket && error.code === "ECONNRESET" && !retried && !signal?.aborted) send(true);
          else reject(error);
        });
        if (signal) {
          const onAbort = () => request.destroy(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
          if (signal.aborted) onAbort();
          else {
            signal.addEventListener("abort", onAbort, { once: true });
            request.on("close", () => signal.removeEventListener("abort", onAbort));
          }
        }
        request.end(body);
      };
      send(false);
    });
  return nodeFetch as unknown as typeof fetch;
}
