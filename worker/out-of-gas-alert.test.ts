import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it } from "vitest";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { createLogger } from "@/lib/log";
import type { Address } from "@/lib/sponsorship/address";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import { startWebhookReceiver, type WebhookReceiver } from "@/test/webhook-receiver";
import { createRequest, readRequest, setUpPipelineFixture, waitFor, type PipelineFixture } from "@/test/worker-fixture";
import type { WorkerSettings } from "./context";
import { startWorker, type RunningWorker } from "./worker";

/**
 * `relayer.out_of_gas` (decisions.md "Operators are told") is reported by the worker that holds the relayer's lease,
 * from what that worker observed itself (a broadcast refused for want of gas money, one accepted, a balance read) with
 * the age of that observation: webhook_report_alert ends an episode only on an observation newer than its start. A
 * worker that takes a relayer over has observed nothing yet, and its silence must not end the episode its last holder
 * reported (the next refusal would then start, and send, it again); the worker that lost the lease stops showing the
 * relayer. Real PostgreSQL and anvil; a JSON-RPC proxy holds one worker's broadcasts back ("txpool is full": no
 * verdict on the funds) while the test needs it to observe nothing.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
const quiet = createLogger({ test: "out-of-gas-alert" });
const poorKey = generatePrivateKey();
const poor = privateKeyToAccount(poorKey).address.toLowerCase() as Address;
const KEY = `relayer.out_of_gas:${poor}`;

let fx: PipelineFixture;
let r: WebhookReceiver | undefined;
let proxy: RpcProxy | undefined;
const workers: RunningWorker[] = [];

setUpPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [poor] }, (started) => (fx = started));

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await proxy?.close();
  await r?.close();
});

async function worker(env: Record<string, string>, settings: Partial<WorkerSettings> = {}): Promise<RunningWorker> {
  const w = await startWorker({
    config: fx.config({ WEBHOOK_URLS: r!.url, WEBHOOK_SECRET: SECRET, ...env }),
    log: quiet,
    settings: { heartbeatMs: 500, ...settings },
    // Evaluated when the test says so only, and a relayer seen without gas has its balance read after 200 ms.
    webhooks: { dispatcher: { pollMs: 50, baseDelayMs: 50, maxDelayMs: 200 }, alertIntervalMs: 3_600_000, relayerGasRefreshMs: 200 },
  });
  workers.push(w);
  return w;
}

type Call = { jsonrpc: "2.0"; id: number; method: string };

async function askNode(calls: Call[]): Promise<{ id: number }[]> {
  const res = await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(calls) });
  return (await res.json()) as { id: number }[];
}

/**
 * A node whose broadcasts are answered "txpool is full" while `holding()`, and counted when they pass. A call with a
 * passing broadcast is forwarded here, so `inFlight()` tells whether one is still on its way (its answer not yet back).
 */
async function holdingNode(holding: () => boolean): Promise<{ url: string; passed: () => number; inFlight: () => number }> {
  let passed = 0;
  let inFlight = 0;
  proxy = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
    const parsed = JSON.parse(body) as Call | Call[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    const sends = calls.filter((c) => c.method === "eth_sendRawTransaction").length;
    if (sends === 0) return undefined;
    if (!holding()) {
      passed += sends;
      inFlight += 1;
      try {
        const answers = await askNode(calls);
        return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
      } finally {
        inFlight -= 1;
      }
    }
    // The rest of a batch still reaches the node.
    const others = calls.filter((c) => c.method !== "eth_sendRawTransaction");
    const answered = others.length > 0 ? await askNode(others) : [];
    const answers = calls.map((c) =>
      c.method === "eth_sendRawTransaction"
        ? { jsonrpc: "2.0", id: c.id, error: { code: -32000, message: "txpool is full" } }
        : answered.find((a) => a.id === c.id),
    );
    return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? answers : answers[0]) };
  });
  return { url: proxy.url, passed: () => passed, inFlight: () => inFlight };
}

async function alertActive(): Promise<boolean | undefined> {
  const [row] = await fx.database.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = ${KEY}`);
  return row?.active;
}

async function heartbeatWithoutGas(workerId: string): Promise<string[] | undefined> {
  const [row] = await fx.database.db.execute<{ details: { relayers: { withoutGas: string[] } } }>(
    sql`SELECT details FROM worker_heartbeats WHERE worker_id = ${workerId}`,
  );
  return row?.details.relayers.withoutGas;
}

describe("relayer.out_of_gas", () => {
  it("is reported only by the worker holding the relayer, from what it observed: one that took it over ends nothing before it has looked", async () => {
    r = await startWebhookReceiver();
    // A's lease runs out between its beats (a 400-ms lease renewed every second), so B can take the relayer over.
    const a = await worker({ RELAYER_PRIVATE_KEYS: poorKey }, { heartbeatMs: 1_000, leaseTtlMs: 400 });
    const { id } = await createRequest(fx);
    await waitFor("A to see its relayer refused for want of gas money", async () => a.ctx.status.relayerGas.get(poor)?.withoutGas);
    await a.webhooks.evaluateAlerts();
    expect(await alertActive()).toBe(true);

    let holding = true;
    const node = await holdingNode(() => holding);
    // B beats far inside A's 400 ms: A judges a worker dead by its own lease time, and would take the relayer back.
    const b = await worker({ RELAYER_PRIVATE_KEYS: poorKey, RPC_URL: node.url }, { heartbeatMs: 100 });
    await waitFor("B to take the relayer over", async () => b.ctx.pool.leased.includes(poor));
    await waitFor("A to have lost it", async () => !a.ctx.pool.leased.includes(poor));

    // B has observed nothing of the relayer (its broadcasts are held back): its evaluation ends nothing. Before, it
    // reported "not out of gas" as of now, which ended the episode A had seen start.
    await b.webhooks.evaluateAlerts();
    await a.webhooks.evaluateAlerts();
    expect(b.ctx.status.relayerGas.has(poor)).toBe(false);
    expect(await alertActive()).toBe(true);
    // A no longer shows it (heartbeat, /health): before, its view from the last refusal stayed for ever.
    await waitFor("A's heartbeat to no longer list the relayer", async () => (await heartbeatWithoutGas(a.workerId))?.length === 0, 10_000);
    // A has shown all it must; stopped, it cannot take the relayer back when a beat of B's is late (a loaded machine).
    await a.stop();

    // B's own observation: the node refuses for want of funds. The same episode: nothing is sent again.
    holding = false;
    await waitFor("B to see the relayer refused for want of gas money", async () => b.ctx.status.relayerGas.get(poor)?.withoutGas);
    await b.webhooks.evaluateAlerts();
    expect(await alertActive()).toBe(true);
    await waitFor("B's heartbeat to list the relayer", async () => (await heartbeatWithoutGas(b.workerId))?.includes(poor));

    // Funded while none of its transactions reaches the node: B's balance read (the evaluation's) ends the alert.
    holding = true;
    // A broadcast that passed before is answered first: the alert must end on the balance read, not on it.
    await waitFor("no passed broadcast still on its way", async () => node.inFlight() === 0);
    const sentBefore = node.passed();
    const funding = await fx.clients.walletClient(LOCAL_DEPLOYER_KEY).sendTransaction({ to: poor, value: 10n ** 18n });
    await fx.clients.waitForTransactionReceipt({ hash: funding });
    await waitFor("the alert to end on B's balance read", async () => {
      await b.webhooks.evaluateAlerts();
      return (await alertActive()) === false;
    });
    expect(node.passed()).toBe(sentBefore);
    expect(b.ctx.status.relayerGas.get(poor)?.withoutGas).toBe(false);

    holding = false;
    await waitFor("the request to complete once funded", async () => (await readRequest(fx, id)).status === "completed");
    // One episode from A's first refusal to B's balance read: one event (before: a second one from B's refusal).
    const [events] = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = 'relayer.out_of_gas'`);
    expect(events!.n).toBe(1);
    await waitFor("the alert delivered", async () => r!.ofType("relayer.out_of_gas").length >= 1);
    expect(r.ofType("relayer.out_of_gas")[0]!.json.data).toEqual({ relayerAddress: poor });
  }, 90_000);
});
