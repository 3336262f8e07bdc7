import { createServer, type Server } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BaseError, HttpRequestError, RpcRequestError } from "viem";
import { createChainClients } from "./clients";
import { createNodeFetch } from "./node-fetch";
import { freePort } from "@/test/ports";

/** A JSON-RPC stand-in: answers eth_chainId, a 401 for /denied, and never answers /hang. */
let server: Server;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if (req.url === "/hang") return;
      if (req.url === "/denied") {
        res.writeHead(401, { "content-type": "text/plain" }).end("no");
        return;
      }
      if (req.url === "/big") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: "x".repeat(4096) }));
        return;
      }
      const parsed = JSON.parse(body) as { id: number; method: string } | { id: number; method: string }[];
      const answer = (r: { id: number; method: string }) =>
        r.method === "eth_chainId"
          ? { jsonrpc: "2.0", id: r.id, result: "0x7a69" }
          : { jsonrpc: "2.0", id: r.id, error: { code: -32601, message: "method not found" } };
      res
        .writeHead(200, { "content-type": "application/json", "x-seen-content-type": req.headers["content-type"] ?? "" })
        .end(JSON.stringify(Array.isArray(parsed) ? parsed.map(answer) : answer(parsed)));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("createNodeFetch", () => {
  it("gives viem the status, headers and body it reads, with the request's headers and body sent", async () => {
    const fetchFn = createNodeFetch();
    const res = await fetchFn(`${base}/`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: '{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}',
    });
    expect(res.ok).toBe(true);
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toBe("application/json");
    expect(res.headers.get("x-seen-content-type")).toBe("application/json");
    expect(JSON.parse(await res.text())).toEqual({ jsonrpc: "2.0", id: 7, result: "0x7a69" });
  });

  it("serves viem's transport: batched calls, JSON-RPC errors and HTTP errors keep viem's error classes", async () => {
    const client = createChainClients({ rpcUrl: `${base}/`, retryCount: 0, fetchFn: createNodeFetch(), maxResponseBodySize: false });
    const [a, b] = await Promise.all([client.getChainId(), client.getChainId()]);
    expect([a, b]).toEqual([31337, 31337]);
    const rpcError = await client.request({ method: "eth_blockNumber" }).catch((e: unknown) => e);
    expect(rpcError instanceof BaseError && rpcError.walk((e) => e instanceof RpcRequestError)).toBeInstanceOf(RpcRequestError);

    const denied = createChainClients({ rpcUrl: `${base}/denied`, retryCount: 0, fetchFn: createNodeFetch(), maxResponseBodySize: false });
    const error = await denied.getChainId().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpRequestError);
    expect((error as HttpRequestError).status).toBe(401);
  });

  it("rejects when nothing listens (an HttpRequestError without a status in viem), and when aborted", async () => {
    const closed = `http://127.0.0.1:${await freePort()}/`;
    const client = createChainClients({ rpcUrl: closed, retryCount: 0, fetchFn: createNodeFetch(), maxResponseBodySize: false });
    const error = await client.getChainId().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpRequestError);
    expect((error as HttpRequestError).status).toBeUndefined();

    const controller = new AbortController();
    const pending = createNodeFetch()(`${base}/hang`, { method: "POST", body: "{}", signal: controller.signal });
    controller.abort(new Error("stop"));
    await expect(pending).rejects.toThrow("stop");
  });

  it("refuses an answer larger than the cap", async () => {
    await expect(createNodeFetch({ maxResponseBytes: 1024 })(`${base}/big`, { method: "POST", body: "{}" })).rejects.toThrow(/larger than 1024 bytes/);
  });

  it("sends a request again, once, when the server reset the kept-alive socket it reused; not a fresh one", async () => {
    // The second request on a connection is dropped unanswered, as when a server closes an idle socket just as it
    // is reused; requests on new connections are answered.
    const port = await freePort();
    let connections = 0;
    const dropping = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        const socket = req.socket as typeof req.socket & { served?: number };
        socket.served = (socket.served ?? 0) + 1;
        if (socket.served === 2) socket.destroy();
        else res.writeHead(200, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      });
    });
    dropping.on("connection", () => connections++);
    await new Promise<void>((resolve) => dropping.listen(port, "127.0.0.1", resolve));
    try {
      const fetchFn = createNodeFetch({ maxSockets: 1 });
      const url = `http://127.0.0.1:${port}/`;
      expect((await fetchFn(url, { method: "POST", body: "{}" })).status).toBe(200);
      expect((await fetchFn(url, { method: "POST", body: "{}" })).status).toBe(200);
      expect(connections).toBe(2);
      // A reset on a fresh connection is not retried: the server may have processed it.
      const refusing = createServer((req) => req.socket.destroy());
      const port2 = await freePort();
      await new Promise<void>((resolve) => refusing.listen(port2, "127.0.0.1", resolve));
      await expect(fetchFn(`http://127.0.0.1:${port2}/`, { method: "POST", body: "{}" })).rejects.toMatchObject({ code: "ECONNRESET" });
      await new Promise((resolve) => refusing.close(resolve));
    } finally {
      dropping.closeAllConnections();
      await new Promise((resolve) => dropping.close(resolve));
    }
  });
});
