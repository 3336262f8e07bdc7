import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { readIsSponsored } from "@/lib/chain/registry";
import { requestIdHash } from "@/lib/chain/ids";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { checkHealth } from "@/lib/health";
import { keptLog } from "@/test/kept-log";
import { setAppContextForTests } from "@/lib/http/app-context";
import { blockWallet } from "@/lib/sponsorship/blocks";
import { GET as getByHash } from "@/app/(api)/sponsorship/tx/[hash]/route";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  createRequest,
  createRequests,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  waitForStatus,
} from "@/test/worker-fixture";

/**
 * The pipeline end to end (issue 4 "What must be shown"): real PostgreSQL, real anvil (a transaction mined at
 * once), the contracts deployed, requests created through the API's domain function, a worker in this process.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
const deployer = relayerAddress(LOCAL_DEPLOYER_KEY);

// The deployer is authorised too, so a test can sponsor a wallet on-chain behind the service's back.
setUpPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [deployer] }, (started) => (fx = started));

beforeAll(async () => {
  setAppContextForTests({ db: fx.database.db, config: fx.config() });
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
});

afterAll(async () => {
  setAppContextForTests({});
});

const waitStatus = (id: string, status: string, timeoutMs = 20_000) => waitForStatus(fx, id, status, timeoutMs);

describe("a request goes through the pipeline", () => {
  it("reaches completed: the wallet receives the amount, isSponsored is true, the hash is recorded and findable", async () => {
    const { id, wallet } = await createRequest(fx);
    const before = await fx.clients.getBalance({ address: wallet });
    worker = await startInProcessWorker(fx);

    const done = await waitStatus(id, "completed");
    expect(done.eligibilityReason).toBe("eligible");
    expect(done.approvedAt).not.toBeNull();
    expect(done.completedAt).not.toBeNull();
    expect(done.statusActor).toBe(`worker:${worker.workerId}`);

    const after = await fx.clients.getBalance({ address: wallet });
    expect(after - before).toBe(SPONSOR_AMOUNT);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(true);

    const relays = await readRelays(fx, id);
    expect(relays).toHaveLength(1);
    const relay = relays[0]!;
    expect(relay.status).toBe("confirmed");
    expect(relay.relayAttempt).toBe(1);
    expect(relay.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(relay.rawTransaction).toMatch(/^0x/);
    expect(relay.nonce).toBe(0);
    expect(relay.submittedAt).not.toBeNull();
    expect(relay.confirmedAt).not.toBeNull();
    expect(relay.blockNumber).toBeGreaterThan(0);

    const receipt = await fx.clients.getTransactionReceipt({ hash: relay.transactionHash as `0x${string}` });
    expect(receipt.status).toBe("success");

    const hash = relay.transactionHash!.toUpperCase().replace("0X", "0x");
    const res = await getByHash(new Request(`http://localhost/sponsorship/tx/${hash}`), { params: Promise.resolve({ hash }) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { id: string; status: string; relayTransactions: { transactionHash: string }[] };
    expect(body.id).toBe(id);
    expect(body.status).toBe("completed");
    expect(body.relayTransactions.map((r) => r.transactionHash)).toEqual([relay.transactionHash]);

    const events = (await readSponsoredEvents(fx)).filter((e) => e.requestId === id);
    expect(events).toEqual([{ requestId: id, requestIdHash: requestIdHash(id), wallet, transactionHash: relay.transactionHash }]);
  });

  it("puts no request id on-chain: the transaction and its Sponsored event carry only the id's hash (decisions.md, Privacy)", async () => {
    const { id } = await createRequest(fx);
    worker = await startInProcessWorker(fx);
    await waitStatus(id, "completed");
    const [relay] = await readRelays(fx, id);
    const hash = relay!.transactionHash as `0x${string}`;

    // Everything public about the payment: the transaction's input and the receipt's logs (topics and data).
    const [transaction, receipt] = await Promise.all([fx.clients.getTransaction({ hash }), fx.clients.getTransactionReceipt({ hash })]);
    const onChain = [transaction.input, ...receipt.logs.flatMap((l) => [...l.topics, l.data])].join(" ").toLowerCase();
    const idHex = id.replaceAll("-", "").toLowerCase();
    expect(onChain).not.toContain(idHex);
    // Not even half of it (a truncated or shifted copy would still link the wallet to the request).
    expect(onChain).not.toContain(idHex.slice(0, 16));
    expect(onChain).not.toContain(idHex.slice(16));
    expect(onChain).toContain(requestIdHash(id).slice(2));
  });

  it("rejects a wallet blocked between creation and review (wallet_blocked), with no relay", async () => {
    const { id, wallet } = await createRequest(fx);
    await blockWallet(fx.database.db, { walletAddress: wallet, reason: "abuse", actor: "admin:test" });
    worker = await startInProcessWorker(fx);

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("wallet_blocked");
    expect(row.rejectedAt).not.toBeNull();
    expect(await readRelays(fx, id)).toEqual([]);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(false);
  });

  it("rejects a wallet sponsored on-chain after the request was created (already_sponsored), with no relay", async () => {
    const { id, wallet } = await createRequest(fx);
    // Someone else pays the wallet through the treasury before the worker reviews the request.
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const hash = await owner.writeContract({
      address: fx.deployment.treasuryAddress,
      abi: treasuryAbi,
      functionName: "sponsor",
      args: [wallet, requestIdHash("00000000-0000-4000-8000-000000000001")],
    });
    await fx.clients.waitForTransactionReceipt({ hash });
    worker = await startInProcessWorker(fx);

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("already_sponsored");
    expect(await readRelays(fx, id)).toEqual([]);
  });

  it("leaves a request approved while its relayer is not authorised (nothing sent, no attempt burned, /health degraded naming it), and relays it once authorised", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    const treasury = fx.deployment.treasuryAddress;
    const removed = await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "removeRelayer", args: [relayer] });
    await fx.clients.waitForTransactionReceipt({ hash: removed });

    const { id, wallet } = await createRequest(fx);
    const nonceBefore = await fx.clients.getTransactionCount({ address: relayer });
    worker = await startInProcessWorker(fx, { WORKER_INTERVAL_MS: "200" });
    await waitStatus(id, "approved");
    // The relay stage saw the request and left it waiting: nothing signed or sent (it would only revert NotRelayer).
    await waitFor("the relay stage to wait for an authorised relayer", async () =>
      worker!.ctx.status.relayWaiting === "relayers_not_authorised" ? true : undefined,
    );
    expect(await readRelays(fx, id)).toEqual([]);
    expect(await fx.clients.getTransactionCount({ address: relayer })).toBe(nonceBefore);
    expect((await readRequest(fx, id)).status).toBe("approved");
    // The operator is told (decisions.md: "requests wait approved and /health is degraded").
    const health = () => checkHealth({ db: fx.database.db, config: fx.config() });
    const degraded = await waitFor("/health to name the relayer not authorised", async () => {
      const report = await health();
      return report.body.checks.worker.code === "relayers_not_authorised" ? report : undefined;
    });
    expect(degraded.body.status).toBe("degraded");
    expect(degraded.body.checks.worker).toMatchObject({ status: "degraded", relayersNotAuthorised: [relayer.toLowerCase()] });

    // The relayer is authorised again: the request is relayed with attempt 1 and completes.
    const added = await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "addRelayer", args: [relayer] });
    await fx.clients.waitForTransactionReceipt({ hash: added });
    await waitStatus(id, "completed");
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(true);
    await waitFor("/health's worker check to be ok again", async () => ((await health()).body.checks.worker.status === "ok" ? true : undefined));
  });

  it("relays through the authorised relayers when one is not, and says so once (a warning naming it), and once more when all are authorised again", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const relayer = relayerAddress(fx.relayerKeys[0]!);
    const treasury = fx.deployment.treasuryAddress;
    await fx.clients.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "removeRelayer", args: [relayer] }),
    });
    const { log, lines } = keptLog();
    try {
      worker = await startInProcessWorker(fx, { RELAYER_PRIVATE_KEYS: `${fx.relayerKeys[0]!},${LOCAL_DEPLOYER_KEY}`, WORKER_INTERVAL_MS: "200" }, {}, log);
      const requests = [await createRequest(fx), await createRequest(fx)];
      for (const { id } of requests) await waitStatus(id, "completed");
      // Both went through the deployer's account, the only one authorised.
      const relays = (await Promise.all(requests.map(({ id }) => readRelays(fx, id)))).flat();
      expect(relays.map((r) => r.relayerAddress)).toEqual([deployer, deployer]);
      const warned = lines.filter((l) => l.msg.startsWith("relayers not authorised by the treasury"));
      // Before: nothing told the operator; the relayer's share went to the other in silence.
      expect(warned.map((l) => l.fields?.relayers)).toEqual([[relayer.toLowerCase()]]);
    } finally {
      await fx.clients.waitForTransactionReceipt({
        hash: await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "addRelayer", args: [relayer] }),
      });
    }
    // Authorised again: said once, and the next request may use it.
    const { id } = await createRequest(fx);
    await waitStatus(id, "completed");
    expect(lines.filter((l) => l.msg === "every leased relayer is authorised by the treasury again")).toHaveLength(1);
  });

  it("leaves requests approved while the treasury is underfunded (no attempt used, health degraded), relays once funded", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const treasury = fx.deployment.treasuryAddress;
    const balance = await fx.clients.getBalance({ address: treasury });
    const drained = await owner.writeContract({
      address: treasury,
      abi: treasuryAbi,
      functionName: "withdraw",
      args: [deployer, balance - SPONSOR_AMOUNT / 2n],
    });
    await fx.clients.waitForTransactionReceipt({ hash: drained });

    const { id } = await createRequest(fx);
    worker = await startInProcessWorker(fx);
    const running = worker;
    await waitFor("the heartbeat to report the treasury underfunded", async () => {
      const details = (await running.ctx.db.query.workerHeartbeats.findFirst())?.details as { treasury?: { underfunded?: boolean } } | undefined;
      return details?.treasury?.underfunded === true;
    });
    expect((await readRequest(fx, id)).status).toBe("approved");
    expect(await readRelays(fx, id)).toEqual([]);

    const funded = await owner.sendTransaction({ to: treasury, value: 10n ** 18n });
    await fx.clients.waitForTransactionReceipt({ hash: funded });
    await waitStatus(id, "completed");
    expect((await readRelays(fx, id)).map((r) => r.relayAttempt)).toEqual([1]);
  });

  it("is woken by the API's insert at once (LISTEN/NOTIFY), not at the next poll", async () => {
    worker = await startInProcessWorker(fx, { WORKER_INTERVAL_MS: "600000" });
    const running = worker;
    // Idle: the first pass is done (it read the chain's block) and the worker sleeps for the 10-minute interval.
    await waitFor("the worker's first pass", async () => running.ctx.status.blockNumber !== undefined);
    const { id } = await createRequest(fx);
    await waitStatus(id, "completed", 20_000);
  });

  it("with WORKER_BATCH_WINDOW_MS, waits that long after a pass before the next one: what arrives meanwhile goes in one batch", async () => {
    worker = await startInProcessWorker(fx, { WORKER_INTERVAL_MS: "600000", WORKER_BATCH_WINDOW_MS: "3000" });
    const running = worker;
    await waitFor("the worker's first pass", async () => running.ctx.status.blockNumber !== undefined);
    const first = await createRequest(fx);
    const a = await waitStatus(first.id, "completed");
    // Woken twice within the window of the pass that approved the first: both wait for it, then share one pass.
    const [second, third] = [await createRequest(fx), await createRequest(fx)];
    const [b, c] = [await waitStatus(second.id, "completed"), await waitStatus(third.id, "completed")];
    expect(b.approvedAt!.getTime()).toBe(c.approvedAt!.getTime());
    expect(b.approvedAt!.getTime() - a.approvedAt!.getTime()).toBeGreaterThanOrEqual(2_500);
  });

  it("with WORKER_BATCH_WINDOW_MS, runs the next pass at once after a full batch (more is waiting)", async () => {
    // Waiting before the worker starts, so its first pass is already full: no window is waited out before it.
    const created = await createRequests(fx, 3);
    worker = await startInProcessWorker(fx, { WORKER_INTERVAL_MS: "600000", WORKER_BATCH_WINDOW_MS: "10000", WORKER_BATCH_SIZE: "1" });
    const done = await Promise.all(created.map((r) => waitStatus(r.id, "completed", 60_000)));
    const approved = done.map((r) => r.approvedAt!.getTime()).sort((x, y) => x - y);
    // Three passes of one request each, one right after the other: not two windows of 10 s apart (the margin is for a
    // loaded machine).
    expect(new Set(approved).size).toBe(3);
    expect(approved[2]! - approved[0]!).toBeLessThan(8_000);
  });
});
