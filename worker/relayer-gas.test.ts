import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workerHeartbeats } from "@/db/schema";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { checkHealth } from "@/lib/health";
import type { Address } from "@/lib/sponsorship/address";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import { createRequest, readRelays, readRequest, startInProcessWorker, waitFor, setUpPipelineFixture, type PipelineFixture } from "@/test/worker-fixture";

/**
 * A relayer without gas money (an authorised key whose account holds nothing): its relays wait `queued`, no
 * attempt is burned, and the operator sees it: the worker's heartbeat lists the relayer and /health's worker check
 * is `degraded` naming it, until the account is funded; then the request completes and health is `ok` again.
 * Whatever words the node uses: anvil says "insufficient funds"; a node that says something else is simulated by a
 * JSON-RPC proxy that refuses the relayer's broadcasts in other words while it is unfunded (the worker then
 * compares the relayer's balance with the transaction's maximum cost).
 */

const poorKeys = [generatePrivateKey(), generatePrivateKey(), generatePrivateKey()];
const poorOf = (key: `0x${string}`) => privateKeyToAccount(key).address.toLowerCase() as Address;
let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let proxy: RpcProxy | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: poorKeys.map(poorOf) }, (started) => (fx = started));

beforeAll(async () => {}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await proxy?.close();
});

/** A node that words "cannot pay" its own way: every eth_sendRawTransaction is refused so while `refusing()`. */
async function nodeWithOtherWords(refusing: () => boolean): Promise<string> {
  proxy = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
    const calls = JSON.parse(body) as { id: number; method: string } | { id: number; method: string }[];
    const list = Array.isArray(calls) ? calls : [calls];
    if (!refusing() || !list.every((c) => c.method === "eth_sendRawTransaction")) return undefined;
    const answers = list.map((c) => ({ jsonrpc: "2.0", id: c.id, error: { code: -32000, message: "sender balance too low for the upfront cost" } }));
    return { status: 200, body: JSON.stringify(Array.isArray(calls) ? answers : answers[0]) };
  });
  return proxy.url;
}

const heartbeatWithoutGas = async () => {
  const [row] = await fx.database.db.select().from(workerHeartbeats);
  return (row?.details as { relayers?: { withoutGas?: string[] } } | undefined)?.relayers?.withoutGas;
};

describe("a relayer without gas money", () => {
  it.each([
    ["in the node's usual words (insufficient funds)", 0, false],
    ["in other words (checked against its balance)", 1, true],
  ] as const)(
    "is reported by the heartbeat and /health (worker degraded) while its relay waits, and cleared once funded: refused %s",
    async (_, which, otherWords) => {
      const poorKey = poorKeys[which]!;
      const poor = poorOf(poorKey);
      let funded = false;
      const rpcUrl = otherWords ? await nodeWithOtherWords(() => !funded) : fx.anvil.rpcUrl;
      worker = await startInProcessWorker(fx, { RELAYER_PRIVATE_KEYS: poorKey, RPC_URL: rpcUrl });
      const { id } = await createRequest(fx);

      await waitFor("the heartbeat to list the relayer without gas", async () => (await heartbeatWithoutGas())?.includes(poor));
      const degraded = await checkHealth({ db: fx.database.db, config: fx.config() });
      expect(degraded.body.status).toBe("degraded");
      expect(degraded.body.checks.worker).toMatchObject({ status: "degraded", relayersWithoutGas: [poor] });
      // Nothing burned: the request waits with its first attempt stored and not broadcast, not failed.
      expect((await readRequest(fx, id)).status).toBe("relayed");
      expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "queued"]]);

      const funding = await fx.clients.walletClient(LOCAL_DEPLOYER_KEY).sendTransaction({ to: poor, value: 10n ** 18n });
      await fx.clients.waitForTransactionReceipt({ hash: funding });
      funded = true;
      await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
      await waitFor("the heartbeat to clear the relayer", async () => (await heartbeatWithoutGas())?.length === 0);
      const healthy = await checkHealth({ db: fx.database.db, config: fx.config() });
      expect(healthy.body.checks.worker.status).toBe("ok");
      expect(healthy.body.checks.worker.relayersWithoutGas).toBeUndefined();
      await worker.stop();
      worker = undefined;
    },
  );

  it("is left out of the rotation while a funded relayer can send: new requests complete on the funded one", async () => {
    const poorKey = poorKeys[2]!;
    const poor = poorOf(poorKey);
    // Two requests in one batch: one for each relayer.
    const first = [await createRequest(fx), await createRequest(fx)];
    worker = await startInProcessWorker(fx, { RELAYER_PRIVATE_KEYS: `${fx.relayerKeys[0]},${poorKey}`, WORKER_INTERVAL_MS: "200" });
    await waitFor("the heartbeat to list the relayer without gas", async () => (await heartbeatWithoutGas())?.includes(poor));

    // Before: every other request went to the relayer without gas money and waited there, with a funded one idle.
    const later = [await createRequest(fx), await createRequest(fx), await createRequest(fx), await createRequest(fx)];
    for (const { id } of later) await waitFor(`request ${id} to complete`, async () => (await readRequest(fx, id)).status === "completed", 20_000);
    for (const { id } of later) expect((await readRelays(fx, id)).map((r) => r.relayerAddress)).not.toContain(poor);
    // What was stored for it before it was known to be unfunded waits, unburned, for its funds.
    const waiting = await Promise.all(first.map(async ({ id }) => (await readRelays(fx, id)).filter((r) => r.relayerAddress === poor)));
    expect(waiting.flat().map((r) => r.status)).toEqual(["queued"]);
    await worker.stop();
    worker = undefined;
  });
});
