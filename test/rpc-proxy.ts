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
  options: { accepts?: () => boolean } = {},
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
  // A connection it does not accept is reset at once, as by a host whose node is down.
  server.on("connection", (socket) => {
    if (options.accepts && !options.accepts()) socket.destroy();
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
    for (const call of callsOf(body)) {
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

type Call = { jsonrpc: "2.0"; id: number; method: string; params?: unknown[] };

/** The JSON-RPC calls of a request body: a batch's elements, or the one call. */
function callsOf(body: string): Call[] {
  const parsed = JSON.parse(body) as Call | Call[];
  return Array.isArray(parsed) ? parsed : [parsed];
}

export type RefusingRpcProxy = RpcProxy & {
  /** The calls refused (or answered with a made-up result) so far, each element of a batch counted, by method. */
  refused: () => Record<string, number>;
};

/**
 * A provider that answers some calls with a JSON-RPC error (`refuse` says which, and with what), or with a result of
 * its own (`{ result }`: a malformed answer), each in its place in a batch, and passes the others to the node (in one
 * request, in their order): a block-range limit on eth_getLogs, a method it does not serve.
 */
export async function startRefusingRpcProxy(
  target: string,
  refuse: (call: { method: string; params?: unknown[] }) => { code: number; message: string } | { result: unknown } | undefined,
): Promise<RefusingRpcProxy> {
  const refused: Record<string, number> = {};
  const proxy = await startRpcProxy(target, async (body) => {
    const parsed = JSON.parse(body) as Call | Call[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    const errors = calls.map((call) => refuse(call));
    if (errors.every((e) => e === undefined)) return undefined;
    const passed = calls.filter((_, i) => errors[i] === undefined);
    const answers = new Map<number, unknown>();
    if (passed.length > 0) {
      const upstream = await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(passed) });
      for (const answer of (await upstream.json()) as { id: number }[]) answers.set(answer.id, answer);
    }
    const out = calls.map((call, i) => {
      const error = errors[i];
      if (error === undefined) return answers.get(call.id);
      refused[call.method] = (refused[call.method] ?? 0) + 1;
      return "result" in error ? { jsonrpc: "2.0", id: call.id, result: error.result } : { jsonrpc: "2.0", id: call.id, error };
    });
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? out : out[0]) };
  });
  return { ...proxy, refused: () => ({ ...refused }) };
}

export type LaggingRpcProxy = RpcProxy & {
  /** From now on answer as the chain stood at block `at` (undefined: pass everything through, caught up). */
  freeze: (at: bigint | undefined) => void;
  /** performance.now() of each eth_getTransactionReceipt it was asked while frozen. */
  receiptAsks: () => number[];
};

/**
 * An endpoint behind the node, consistently: while frozen it answers as the chain stood at `at` (the head, nonces,
 * receipts and logs of later blocks unknown), like a node that has not imported the newest blocks yet, or one that
 * stopped importing them and still answers.
 */
export async function startLaggingRpcProxy(target: string): Promise<LaggingRpcProxy> {
  let frozenAt: bigint | undefined;
  const asks: number[] = [];
  const node = async (call: Call): Promise<{ result?: unknown }> =>
    (await (await fetch(target, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call) })).json()) as {
      result?: unknown;
    };
  const hex = (n: bigint) => `0x${n.toString(16)}`;
  const answer = async (call: Call, at: bigint): Promise<unknown> => {
    const params = call.params ?? [];
    switch (call.method) {
      case "eth_blockNumber":
        return { jsonrpc: "2.0", id: call.id, result: hex(at) };
      case "eth_getTransactionCount":
      case "eth_getBlockByNumber":
        return node({
          ...call,
          params: params.map((p, i) => (i === (call.method === "eth_getBlockByNumber" ? 0 : 1) && (p === "latest" || p === "pending") ? hex(at) : p)),
        });
      case "eth_getTransactionReceipt": {
        asks.push(performance.now());
        const answered = (await node(call)) as { result: { blockNumber: string } | null };
        return answered.result && BigInt(answered.result.blockNumber) > at ? { ...answered, result: null } : answered;
      }
      case "eth_getLogs": {
        const [filter] = params as [{ fromBlock?: string; toBlock?: string }];
        if (filter.fromBlock && filter.fromBlock.startsWith("0x") && BigInt(filter.fromBlock) > at) return { jsonrpc: "2.0", id: call.id, result: [] };
        const to = filter.toBlock && filter.toBlock.startsWith("0x") && BigInt(filter.toBlock) < at ? filter.toBlock : hex(at);
        return node({ ...call, params: [{ ...filter, toBlock: to }] });
      }
      default:
        return node(call);
    }
  };
  const proxy = await startRpcProxy(target, async (body) => {
    const at = frozenAt;
    if (at === undefined) return undefined;
    const parsed = JSON.parse(body) as Call | Call[];
    const answers = await Promise.all((Array.isArray(parsed) ? parsed : [parsed]).map((call) => answer(call, at)));
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
  });
  return { ...proxy, freeze: (at) => void (frozenAt = at), receiptAsks: () => [...asks] };
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
  /** The JSON-RPC calls it received (each element of a batch), with when (performance.now()). */
  calls: () => { method: string; at: number }[];
};

/** A JSON-RPC proxy that can go silent: it accepts TCP connections and requests and never answers them. */
export async function startSilentRpcProxy(target: string, initially: boolean | RegExp = true): Promise<SilentRpcProxy> {
  let when = initially;
  let requests = 0;
  const calls: { method: string; at: number }[] = [];
  const never = new Promise<undefined>(() => {});
  const proxy = await startRpcProxy(target, (body) => {
    requests++;
    const at = performance.now();
    try {
      for (const call of callsOf(body)) calls.push({ method: String(call.method), at });
    } catch {
      calls.push({ method: "(not JSON)", at });
    }
    if (when instanceof RegExp && when.test(body)) when = true;
    return when === true ? never : undefined;
  });
  return { ...proxy, silence: (on) => void (when = on), silent: () => when === true, requests: () => requests, calls: () => [...calls] };
}

export type DownRpcProxy = RpcProxy & {
  /** From now on connections are accepted and requests forwarded to the node. */
  up: () => void;
  /** JSON-RPC calls forwarded since it came up (each element of a batch counts), by method. */
  byMethod: () => Record<string, number>;
};

/** An endpoint down until `up()`: each connection is reset at once (not reached), then it forwards to the node. */
export async function startDownRpcProxy(target: string): Promise<DownRpcProxy> {
  let up = false;
  const methods: Record<string, number> = {};
  const proxy = await startRpcProxy(
    target,
    (body) => {
      for (const call of callsOf(body)) methods[call.method] = (methods[call.method] ?? 0) + 1;
      return undefined;
    },
    { accepts: () => up },
  );
  return { ...proxy, up: () => void (up = true), byMethod: () => ({ ...methods }) };
}
