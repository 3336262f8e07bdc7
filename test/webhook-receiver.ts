import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A real HTTP receiver of webhooks for tests: records every request (headers, raw body) and answers what `respond`
 * says for it: a status, or "hang" (never answers; closed with the receiver).
 */

export type ReceivedWebhook = { headers: Record<string, string>; body: string; status: number | "hang" };

export type WebhookReceiver = {
  url: string;
  received: ReceivedWebhook[];
  /** Answers for the next requests (the default answers 200). */
  respond: (fn: (request: { headers: Record<string, string>; body: string; nthOfId: number }) => number | "hang") => void;
  /** Received requests whose body's `type` is one of `types` (parsed bodies, in order of arrival). */
  ofType: (...types: string[]) => { headers: Record<string, string>; body: string; json: { type: string; timestamp: string; data: Record<string, unknown> } }[];
  close: () => Promise<void>;
};

export async function startWebhookReceiver(port = 0): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const perId = new Map<string, number>();
  const hanging = new Set<ServerResponse>();
  let respond: Parameters<WebhookReceiver["respond"]>[0] = () => 200;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(",") : (v ?? "")]));
      const body = Buffer.concat(chunks).toString("utf8");
      const id = headers["webhook-id"] ?? "";
      const nthOfId = (perId.get(id) ?? 0) + 1;
      perId.set(id, nthOfId);
      const status = respond({ headers, body, nthOfId });
      received.push({ headers, body, status });
      if (status === "hang") {
        hanging.add(res);
        return;
      }
      res.writeHead(status, { "content-type": "text/plain" }).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}/hooks`,
    received,
    respond: (fn) => {
      respond = fn;
    },
    ofType: (...types) =>
      received
        .map((r) => ({ headers: r.headers, body: r.body, json: JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, unknown> } }))
        .filter((r) => types.length === 0 || types.includes(r.json.type)),
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
