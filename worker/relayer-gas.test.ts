import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { workerHeartbeats } from "@/db/schema";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { checkHealth } from "@/lib/health";
import type { Address } from "@/lib/sponsorship/address";
import type { RunningWorker } from "./worker";
import { createRequest, readRelays, readRequest, startInProcessWorker, startPipelineFixture, waitFor, type PipelineFixture } from "./test-support";

/**
 * A relayer without gas money (an authorised key whose account holds nothing): its relays wait `queued`, no
 * attempt is burned, and the operator sees it: the worker's heartbeat lists the relayer and /health's worker check
 * is `degraded` naming it, until the account is funded; then the request completes and health is `ok` again.
 */

const poorKey = generatePrivateKey();
const poor = privateKeyToAccount(poorKey).address.toLowerCase() as Address;
let fx: PipelineFixture;
let worker: RunningWorker | undefined;

beforeAll(async () => {
  fx = await startPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [poor] });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await fx?.stop();
});

const heartbeatWithoutGas = async () => {
  const [row] = await fx.database.db.select().from(workerHeartbeats);
  return (row?.details as { relayers?: { withoutGas?: string[] } } | undefined)?.relayers?.withoutGas;
};

describe("a relayer without gas money", () => {
  it("is reported by the heartbeat and /health (worker degraded) while its relay waits, and cleared once funded", async () => {
    worker = await startInProcessWorker(fx, { RELAYER_PRIVATE_KEYS: poorKey });
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
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed");
    await waitFor("the heartbeat to clear the relayer", async () => (await heartbeatWithoutGas())?.length === 0);
    const healthy = await checkHealth({ db: fx.database.db, config: fx.config() });
    expect(healthy.body.checks.worker.status).toBe("ok");
    expect(healthy.body.checks.worker.relayersWithoutGas).toBeUndefined();
  });
});
