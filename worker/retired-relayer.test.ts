import { randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, it } from "vitest";
import { relayTransactions, sponsorshipRequests } from "@/db/schema";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { createMetricsRegistry, createViemChainReader, registerServiceMetrics } from "@/lib/metrics";
import type { Address } from "@/lib/sponsorship/address";
import { startWebhookReceiver, type WebhookReceiver } from "@/test/webhook-receiver";
import { createRequest, readRequest, relayerAddress, setUpPipelineFixture, waitFor, type PipelineFixture } from "@/test/worker-fixture";
import { startWorker, type RunningWorker } from "./worker";

/**
 * A relayer retired (its key removed from RELAYER_PRIVATE_KEYS of every worker) is held by no worker: nothing would
 * ever update its series or end its `relayer.out_of_gas` alert. Once no running worker has its key and nothing of it
 * is open (db/queries/relayers.ts relayerInService), it leaves the relayer metrics and its alert is ended; while a
 * transaction of it is open it stays (its request waits for a worker with the key), and while no worker runs at all
 * every relayer stays (nothing says which were retired). Real workers, PostgreSQL and anvil.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
const quiet = createLogger({ test: "retired-relayer" });
const poorKey = generatePrivateKey();
const poor = privateKeyToAccount(poorKey).address.toLowerCase() as Address;

let fx: PipelineFixture;
let r: WebhookReceiver;
const running = new Set<RunningWorker>();

setUpPipelineFixture({ blockTime: 0, relayers: 2, extraRelayers: [poor] }, (started) => (fx = started));

afterAll(async () => {
  for (const w of running) await w.stop();
  await r?.close();
});

async function worker(keys: readonly string[]): Promise<RunningWorker> {
  const w = await startWorker({
    config: fx.config({ RELAYER_PRIVATE_KEYS: keys.join(","), WEBHOOK_URLS: r.url, WEBHOOK_SECRET: SECRET }),
    log: quiet,
    settings: { heartbeatMs: 500 },
    // Alerts evaluated when the test says so only.
    webhooks: { dispatcher: { pollMs: 50, baseDelayMs: 50, maxDelayMs: 200 }, alertIntervalMs: 3_600_000 },
  });
  running.add(w);
  return w;
}

async function stop(w: RunningWorker): Promise<void> {
  running.delete(w);
  await w.stop();
}

/** The relayers a scrape reports, in the nonce-lag and the balance series. */
async function relayersInMetrics(): Promise<{ nonceLag: string[]; balance: string[] }> {
  const registry = createMetricsRegistry("web", { defaultMetrics: false });
  registerServiceMetrics(registry, { sources: () => ({ db: fx.database.db, chain: createViemChainReader(fx.anvil.rpcUrl) }), cacheMs: 0 });
  const all = await registry.getMetricsAsJSON();
  const relayers = (name: string) => (all.find((m) => m.name === name)?.values ?? []).map((v) => String((v.labels as Record<string, string>).relayer)).sort();
  return { nonceLag: relayers("sponsorship_relayer_nonce_lag"), balance: relayers("sponsorship_relayer_balance_wei") };
}

/** Leases released longer ago than GONE_WORKER_AFTER_SECONDS, as if the retired relayers had been let go long ago. */
async function ageLeases(): Promise<void> {
  await fx.database.db.execute(sql`UPDATE relayer_accounts SET updated_at = now() - interval '1 hour' WHERE lease_owner IS NULL OR lease_expires_at < now()`);
}

async function alertActive(relayer: string): Promise<boolean | undefined> {
  const [row] = await fx.database.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = ${`relayer.out_of_gas:${relayer}`}`);
  return row?.active;
}

describe("a relayer retired from every worker", () => {
  it("leaves the relayer metrics and its out-of-gas alert ends once no running worker has its key and nothing of it is open", async () => {
    r = await startWebhookReceiver();
    const [one, two] = fx.relayerKeys.map(relayerAddress) as [Address, Address];
    const all = [one, two, poor].sort();

    // A first worker with all three keys: the unfunded one's relay waits, and its alert starts.
    const first = await worker([...fx.relayerKeys, poorKey]);
    const poorRequest = await waitFor("a relay of the unfunded relayer", async () => {
      const { id } = await createRequest(fx);
      const relays = await waitFor("the request's first attempt", async () => {
        const rows = await fx.database.db.select().from(relayTransactions).where(eq(relayTransactions.sponsorshipRequestId, id));
        return rows.length > 0 ? rows : undefined;
      });
      return relays[0]!.relayerAddress === poor ? id : undefined;
    });
    await waitFor("the worker to see it without gas", async () => first.ctx.status.relayerGas.get(poor)?.withoutGas);
    await first.webhooks.evaluateAlerts();
    expect(await alertActive(poor)).toBe(true);
    expect((await relayersInMetrics()).nonceLag).toEqual(all);

    // Replaced by a worker with the first key only. The second relayer is retired once it has not been leased for
    // GONE_WORKER_AFTER_SECONDS (aged here); the unfunded one still has its relay open (it waits for a worker with the
    // key), so it stays, and so does its alert.
    const others = (await fx.database.db.select().from(sponsorshipRequests)).filter((q) => q.id !== poorRequest);
    for (const q of others) await waitFor(`request ${q.id} to complete`, async () => ((await readRequest(fx, q.id)).status === "completed" ? true : undefined));
    await stop(first);
    const second = await worker([fx.relayerKeys[0]!]);
    // Released a moment ago, beside a live worker without its key: still in service (a worker restarted with its own
    // keys is gone for the seconds it takes to come back).
    expect((await relayersInMetrics()).nonceLag).toEqual(all);
    await ageLeases();
    expect(await relayersInMetrics()).toEqual({ nonceLag: [one, poor].sort(), balance: [one, poor].sort() });
    await second.webhooks.evaluateAlerts();
    expect(await alertActive(poor)).toBe(true);

    // A worker with its key comes back for a while, once it is funded, and settles its relay (evaluating nothing: the
    // alert is left active, as by a worker stopped before its next evaluation), then goes.
    const funding = await fx.clients.walletClient(LOCAL_DEPLOYER_KEY).sendTransaction({ to: poor, value: 10n ** 18n });
    await fx.clients.waitForTransactionReceipt({ hash: funding });
    const settler = await worker([poorKey]);
    await waitFor("the unfunded relayer's request to complete", async () => (await readRequest(fx, poorRequest)).status === "completed");
    await stop(settler);
    await ageLeases();

    // Now retired too: out of the metrics, and its alert ended by the worker that remains (before, for ever).
    expect((await relayersInMetrics()).nonceLag).toEqual([one]);
    await second.webhooks.evaluateAlerts();
    expect(await alertActive(poor)).toBe(false);

    // With no worker running, nothing says which relayers were retired: all are reported.
    await stop(second);
    expect((await relayersInMetrics()).nonceLag).toEqual(all);
  }, 120_000);
});
