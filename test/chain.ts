import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startAnvil, type Anvil } from "@/contracts/anvil";
import { freePort } from "./ports";

/** A private anvil for one test file (free port, temporary directory): call in `beforeAll`, stop in `afterAll`. */
export async function startTestChain(options: { blockTime?: number; chainId?: number } = {}): Promise<Anvil> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "sponsorship-anvil-"));
  const anvil = await startAnvil({
    port: await freePort(),
    blockTime: options.blockTime ?? 0,
    dataDir,
    ...(options.chainId === undefined ? {} : { chainId: options.chainId }),
  });
  return {
    ...anvil,
    stop: async () => {
      const clean = await anvil.stop();
      await rm(dataDir, { recursive: true, force: true });
      return clean;
    },
  };
}

/** One JSON-RPC call to a test chain (anvil's own methods: `anvil_setBalance`, `evm_setAutomine`, ...). */
export async function chainRpc<T = unknown>(rpcUrl: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}
