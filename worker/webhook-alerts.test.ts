import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { setPaused } from "@/db/queries/controls";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { createLogger } from "@/lib/log";
import type { Address } from "@/lib/sponsorship/address";
import { startWebhookReceiver, type WebhookReceiver } from "@/test/webhook-receiver";
import { startWorker, type RunningWorker } from "./worker";
import { SPONSOR_AMOUNT, anvilRpc, createRequest, readRequest, setUpPipelineFixture, waitFor, waitTerminal, type PipelineFixture } from "@/test/worker-fixture";

/**
 * decisions.md "Operators are told", alerts (issue 12 item 2): each is sent once when its condition starts and again
 * only after it ended, the state kept in PostgreSQL (alert_state) so several workers do not send it twice; the pause
 * and its end are written in the transaction that changes them. Real PostgreSQL, anvil and an HTTP receiver.
 */

const SECRET = `whsec_${randomBytes(32).toString("base64")}`;
const verifier = new Webhook(SECRET);
const quiet = createLogger({ test: "webhook-alerts" });
const GWEI = 10n ** 9n;
const poorKey = generatePrivateKey();
const poor = privateKeyToAccount(poorKey).address.toLowerCase() as Address;

let fx: PipelineFixture;
let r: WebhookReceiver;
const workers: RunningWorker[] = [];

// A treasury of 12 sponsorships: below the default TREASURY_LOW_SPONSORSHIPS (100) from the start.
setUpPipelineFixture({ blockTime: 0, relayers: 2, fundWei: 12n * SPONSOR_AMOUNT, extraRelayers: [poor] }, (started) => (fx = started));

afterEach(async () => {
  for (const w of workers.splice(0)) await w.stop();
  await r?.close();
  await fx.database.db.execute(sql`UPDATE webhook_endpoints SET active = false WHERE active`);
  // Each test starts with the fixture's 12 sponsorships. The first spends as many as it needs requests until both
  // workers have read the treasury (8 on a loaded machine, 12 once in CI): the later tests' requests then waited,
  // approved, for a treasury short of funds, and their relays never came.
  await anvilRpc(fx, "anvil_setBalance", [fx.deployment.treasuryAddress, `0x${(12n * SPONSOR_AMOUNT).toString(16)}`]);
});

async function worker(
  env: Record<string, string> = {},
  options: { treasuryRefreshMs?: number; alertIntervalMs?: number; alertClearMs?: number } = {},
): Promise<RunningWorker> {
  const w = await startWorker({
    config: fx.config({ WEBHOOK_URLS: r.url, WEBHOOK_SECRET: SECRET, ...env }),
    log: quiet,
    settings: { heartbeatMs: 500 },
    webhooks: { dispatcher: { pollMs: 50, baseDelayMs: 50, maxDelayMs: 200 }, alertIntervalMs: 100, ...options },
  });
  workers.push(w);
  return w;
}

/** Verified events of these types the receiver got. */
function received(...types: string[]) {
  return r.ofType(...types).map((e) => {
    verifier.verify(e.body, e.headers);
    return e.json;
  });
}

async function settled(type: string): Promise<void> {
  await waitFor(`every ${type} delivery settled`, async () => {
    const rows = await fx.database.db.execute<{ n: number }>(sql`
      SELECT count(*)::int AS n FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.type = ${type} AND d.status = 'pending'`);
    return rows[0]!.n === 0;
  });
}

async function eventsInOutbox(type: string): Promise<number> {
  const rows = await fx.database.db.execute<{ n: number }>(sql`SELECT count(*)::int AS n FROM webhook_events WHERE type = ${type}`);
  return rows[0]!.n;
}

describe("alerts", () => {
  it("sends treasury.low once, not once per worker step, with two workers watching", async () => {
    r = await startWebhookReceiver();
    // No evaluation of their own (the test makes them), so nothing reads the treasury beside the relay stage.
    const alone = { alertIntervalMs: 3_600_000 };
    const [one, two] = [await worker({ RELAYER_PRIVATE_KEYS: fx.relayerKeys[0]! }, alone), await worker({ RELAYER_PRIVATE_KEYS: fx.relayerKeys[1]! }, alone)];
    for (const w of [one!, two!])
      w.ctx.chain.treasuryStateAside = () => Promise.reject(new Error("the idle worker's treasury read, while the relay stage reads it"));
    // Both workers relay (each holds one relayer), so both have read the treasury and both see it low.
    await waitFor(
      "both workers to have read the treasury",
      async () => {
        if (one!.ctx.status.treasury && two!.ctx.status.treasury) return true;
        await waitTerminal(fx, [(await createRequest(fx)).id], 30_000);
        return false;
      },
      60_000,
    );
    // Many evaluations, concurrently on both: still one event.
    await Promise.all(Array.from({ length: 10 }, () => [one!.webhooks.evaluateAlerts(), two!.webhooks.evaluateAlerts()]).flat());
    await waitFor("treasury.low delivered", async () => received("treasury.low").length >= 1);
    await settled("treasury.low");
    expect(await eventsInOutbox("treasury.low")).toBe(1);
    const [alert] = received("treasury.low");
    expect(received("treasury.low")).toHaveLength(1);
    expect(alert!.data).toMatchObject({ threshold: 100, amountWei: SPONSOR_AMOUNT.toString() });
    expect(alert!.data.sponsorshipsLeft as number).toBeLessThan(100);
  });

  it("sends treasury.low from a worker that relays nothing: it reads the treasury itself when no relay has for a while", async () => {
    // A new episode: whatever an earlier test reported has ended.
    await fx.database.db.execute(sql`DELETE FROM alert_state WHERE key = 'treasury.low'`);
    const open = await fx.database.db.execute<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM sponsorship_requests WHERE status IN ('pending', 'approved', 'relayed')`,
    );
    expect(open[0]!.n).toBe(0); // nothing to relay: the relay stage never reads the treasury
    const treasury = fx.deployment.treasuryAddress;
    r = await startWebhookReceiver();
    // 12 sponsorships left against a threshold of 5 (afterEach set them): not low when the worker starts.
    const w = await worker({ RELAYER_PRIVATE_KEYS: fx.relayerKeys[0]!, TREASURY_LOW_SPONSORSHIPS: "5" }, { treasuryRefreshMs: 200 });
    // The stages' read notes the chain's health, the clock of the stage deadline: beside the stages it must not be used.
    w.ctx.chain.treasuryState = () => Promise.reject(new Error("the stages' treasury read, used beside the stages"));
    await waitFor("the worker to read the treasury", async () => (w.ctx.status.treasury ? true : undefined));
    // Drained while nothing is sent (the owner withdrew): 2 sponsorships left (afterEach funds it again).
    await anvilRpc(fx, "anvil_setBalance", [treasury, `0x${(2n * SPONSOR_AMOUNT).toString(16)}`]);
    // Before: an idle worker never read the treasury again, so no alert came until the next relay.
    await waitFor("treasury.low delivered", async () => received("treasury.low").length >= 1);
    expect(received("treasury.low")[0]!.data).toMatchObject({ threshold: 5, sponsorshipsLeft: 2, amountWei: SPONSOR_AMOUNT.toString() });
  });

  it("sends fees.above_ceiling when the base fee rises above MAX_FEE_PER_GAS_GWEI, and again only after it fell and rose again", async () => {
    r = await startWebhookReceiver();
    // Ended once seen below the ceiling for 300 ms (5 minutes by default: ALERT_CLEAR_MS).
    const w = await worker({ MAX_FEE_PER_GAS_GWEI: "50", RELAYER_PRIVATE_KEYS: fx.relayerKeys[0]! }, { alertClearMs: 300 });
    const raise = async () => {
      await anvilRpc(fx, "anvil_setNextBlockBaseFeePerGas", [`0x${(200n * GWEI).toString(16)}`]);
      await anvilRpc(fx, "evm_mine");
    };
    const lower = async () => {
      for (let i = 0; i < 100 && ((await fx.clients.getBlock({ blockTag: "latest" })).baseFeePerGas ?? 0n) > 50n * GWEI; i++) await anvilRpc(fx, "evm_mine");
    };
    for (let episode = 1; episode <= 2; episode++) {
      await raise();
      const { id } = await createRequest(fx);
      await waitFor("the worker to see the fees above the ceiling", async () => w.ctx.feeCeiling?.state.aboveCeiling === true);
      await Promise.all([w.webhooks.evaluateAlerts(), w.webhooks.evaluateAlerts()]);
      await waitFor(`fees.above_ceiling delivered (episode ${episode})`, async () => received("fees.above_ceiling").length >= episode);
      expect((await readRequest(fx, id)).status).toBe("approved");
      await lower();
      await waitFor("the request to complete once fees fell", async () => (await readRequest(fx, id)).status === "completed");
      await waitFor("the alert to end", async () => {
        await w.webhooks.evaluateAlerts();
        const rows = await fx.database.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = 'fees.above_ceiling'`);
        return rows[0]?.active === false;
      });
    }
    await settled("fees.above_ceiling");
    const alerts = received("fees.above_ceiling");
    expect(alerts).toHaveLength(2);
    expect(alerts[0]!.data).toMatchObject({ ceilingWei: (50n * GWEI).toString() });
  });

  it("sends sponsorships.paused and sponsorships.resumed from the transaction that pauses and resumes, and nothing for one rolled back", async () => {
    r = await startWebhookReceiver();
    await worker();
    const db = fx.database.db;
    await db
      .transaction(async (tx) => {
        await setPaused(tx, { paused: true, reason: "never happened", actor: "admin:test", now: new Date() });
        throw new Error("rollback");
      })
      .catch(() => {});
    await db.transaction((tx) => setPaused(tx, { paused: true, reason: "maintenance", actor: "admin:test", now: new Date() }));
    await db.transaction((tx) => setPaused(tx, { paused: true, reason: "again", actor: "admin:test", now: new Date() })); // already paused: no change
    await db.transaction((tx) => setPaused(tx, { paused: false, reason: null, actor: "admin:test", now: new Date() }));
    await waitFor("paused and resumed delivered", async () => received("sponsorships.paused", "sponsorships.resumed").length >= 2);
    await settled("sponsorships.resumed");
    const events = received("sponsorships.paused", "sponsorships.resumed");
    expect(events.map((e) => e.type)).toEqual(["sponsorships.paused", "sponsorships.resumed"]);
    expect(events[0]!.data).toMatchObject({ reason: "maintenance" });
  });

  it("sends budget.exhausted once while the global budget is spent", async () => {
    r = await startWebhookReceiver();
    const w = await worker({ SPONSOR_BUDGET_PER_HOUR: "1", RELAYER_PRIVATE_KEYS: fx.relayerKeys[0]! });
    await createRequest(fx); // requests were created earlier in this file: the hour's budget of 1 is spent
    await Promise.all([w.webhooks.evaluateAlerts(), w.webhooks.evaluateAlerts(), w.webhooks.evaluateAlerts()]);
    await waitFor("budget.exhausted delivered", async () => received("budget.exhausted").length >= 1);
    await settled("budget.exhausted");
    expect(received("budget.exhausted")).toHaveLength(1);
    expect(received("budget.exhausted")[0]!.data).toMatchObject({ window: "hour", budgetPerHour: 1 });
  });

  it("sends relayer.out_of_gas for a relayer whose broadcast the node refuses for want of gas money", async () => {
    r = await startWebhookReceiver();
    const w = await worker({ RELAYER_PRIVATE_KEYS: poorKey });
    const { id } = await createRequest(fx);
    await waitFor("the worker to see its relayer without gas", async () => w.ctx.status.relayerGas.get(poor)?.withoutGas);
    await w.webhooks.evaluateAlerts();
    await waitFor("relayer.out_of_gas delivered", async () => received("relayer.out_of_gas").length >= 1);
    expect(received("relayer.out_of_gas")[0]!.data).toEqual({ relayerAddress: poor });
    const funding = await fx.clients.walletClient(LOCAL_DEPLOYER_KEY).sendTransaction({ to: poor, value: 10n ** 18n });
    await fx.clients.waitForTransactionReceipt({ hash: funding });
    await waitFor("the request to complete once funded", async () => (await readRequest(fx, id)).status === "completed");
    await w.webhooks.evaluateAlerts();
    const rows = await fx.database.db.execute<{ active: boolean }>(sql`SELECT active FROM alert_state WHERE key = ${`relayer.out_of_gas:${poor}`}`);
    expect(rows[0]?.active).toBe(false);
    expect(received("relayer.out_of_gas")).toHaveLength(1);
  });
});
