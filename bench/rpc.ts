/** Raw JSON-RPC batches: the bench talks to anvil without a client library in between where speed matters. */

type RpcResult = { id: number; result?: unknown; error?: { code: number; message: string } };

let nextId = 1;

export async function rpcBatch(rpcUrl: string, calls: { method: string; params: unknown[] }[]): Promise<RpcResult[]> {
  if (calls.length === 0) return [];
  const body = calls.map((c) => ({ jsonrpc: "2.0", id: nextId++, method: c.method, params: c.params }));
  const res = await fetch(rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`JSON-RPC batch answered HTTP ${res.status}`);
  const out = (await res.json()) as RpcResult[];
  const byId = new Map(out.map((r) => [r.id, r]));
  return body.map((b) => byId.get(b.id) ?? { id: b.id, error: { code: -1, message: "missing from batch answer" } });
}

export async function rpc<T>(rpcUrl: string, method: string, params: unknown[] = []): Promise<T> {
  const [r] = await rpcBatch(rpcUrl, [{ method, params }]);
  if (!r || r.error) throw new Error(`${method}: ${r?.error?.message ?? "no answer"}`);
  return r.result as T;
}
