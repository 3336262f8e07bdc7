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
