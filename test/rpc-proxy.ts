import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A JSON-RPC HTTP proxy in front of a real node (anvil), for tests that need what a hosted provider does: count
 * requests, or refuse some (a 401, a batch error, a log range too wide). `intercept` sees each request's body and
 * either answers it itself (at once or after asking the node itself, e.g. for the rest of a batch) or returns
 * undefined to let it through to the node.
 */

export type RpcProxyAnswer = { status: number; contentType?: string; body: string };
export type RpcProxy = { url: string; close: () => Promise<void> };

export async function startRpcProxy(
  target: string,
  intercept: (body: string) => RpcProxyAnswer | undefined | Promise<RpcProxyAnswer | undefined> = () => undefined,
): Promise<RpcProxy> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      void (async () => {
        const answer = await intercept(body);
        if (answer) {
          res.writeHead(answer.status, { "content-type": answer.contentType ?? "application/json" }).end(answer.body);
          return;
        }
        const upstream = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body });
        const text = await upstream.text();
        res.writeHead(upstream.status, { "content-type": "application/json" }).end(text);
      })().catch(() => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export type CountingRpcProxy = RpcProxy & {
  /** Hashes of the raw transactions broadcast through it (eth_sendRawTransaction). */
  broadcasts: Set<string>;
  /** JSON-RPC calls seen (each element of a batch counts), by method. */
  calls: () => number;
  byMethod: () => Record<string, number>;
  /** Cut: answer every request 503 without a JSON-RPC body (a provider's outage); calls are still counted. */
  cut: (on: boolean) => void;
};

/** A proxy that counts what reaches the node: JSON-RPC calls by method and broadcast transactions. */
export async function startCountingRpcProxy(target: string): Promise<CountingRpcProxy> {
  const { keccak256 } = await import("viem");
  const broadcasts = new Set<string>();
  const methods: Record<string, number> = {};
  let cut = false;
  const proxy = await startRpcProxy(target, (body) => {
    const parsed = JSON.parse(body) as { method: string; params?: unknown[] } | { method: string; params?: unknown[] }[];
    for (const call of Array.isArray(parsed) ? parsed : [parsed]) {
      methods[call.method] = (methods[call.method] ?? 0) + 1;
      if (call.method === "eth_sendRawTransaction") broadcasts.add(keccak256(call.params![0] as `0x${string}`));
    }
    return cut ? { status: 503, contentType: "text/plain", body: "Service Unavailable" } : undefined;
  });
  return {
    ...proxy,
    broadcasts,
    calls: () => Object.values(methods).reduce((a, b) => a + b, 0),
    byMethod: () => ({ ...methods }),
    cut: (on) => void (cut = on),
  };
}

export type SilentRpcProxy = RpcProxy & {
  /**
   * `true`: every request from now on is read and never answered (the connection stays open), as by a node that
   * accepts connections and hangs. A RegExp: requests pass until the first whose body matches it, and from that one
   * on none is answered. `false`: requests pass to the node again (those already held stay unanswered).
   */
  silence: (when: boolean | RegExp) => void;
  /** Whether it is silent now. */
  silent: () => boolean;
  /** HTTP requests it received (answered or not). */
  requests: () => number;
};

/** A JSON-RPC proxy that can go silent: it accepts TCP connections and requests and never answers them. */
export async function startSilentRpcProxy(target: string, initially: boolean | RegExp = true): Promise<SilentRpcProxy> {
  let when = initially;
  let requests = 0;
  const never = new Promise<undefined>(() => {});
  const proxy = await startRpcProxy(target, (body) => {
    requests++;
    if (when instanceof RegExp && when.test(body)) when = true;
    return when === true ? never : undefined;
  });
  return { ...proxy, silence: (on) => void (when = on), silent: () => when === true, requests: () => requests };
}
