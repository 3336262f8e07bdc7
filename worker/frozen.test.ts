import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { createLogger } from "@/lib/log";
import type { RunningWorker } from "./worker";
import {
  createRequest,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  spawnWorker,
  startInProcessWorker,
  stopSpawned,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  type SpawnedWorker,
} from "@/test/worker-fixture";

/**
 * A worker process frozen (SIGSTOP: a paused container, a suspended VM) in the middle of its relay transaction,
 * holding the row lock of its relayer and of the requests it claimed. Its lease expires; another worker must be
 * able to take the relayer over and finish the work, however long the frozen one stays frozen.
 */

let fx: PipelineFixture;
let frozenWorker: SpawnedWorker | undefined;
let other: RunningWorker | undefined;
let anvilStopped = false;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {});

afterAll(async () => {
  if (anvilStopped) process.kill(fx.anvil.pid, "SIGCONT");
  if (frozenWorker) {
    frozenWorker.process.kill("SIGCONT");
    await stopSpawned(frozenWorker);
  }
  await other?.stop();
});

/** Whether some transaction holds the relayer's row lock right now (probed with NOWAIT, rolled back). */
async function relayerRowLocked(relayer: string): Promise<boolean> {
  const probe = Symbol("probe");
  try {
    await fx.database.db.$client.begin(async (tx) => {
      await tx`SELECT 1 FROM relayer_accounts WHERE address = ${relayer} FOR UPDATE NOWAIT`;
      throw probe;
    });
  } catch (error) {
    if (error === probe) return false;
    if ((error as { code?: string }).code === "55P03") return true;
    throw error;
  }
  return false;
}

describe("a worker frozen inside its relay transaction", () => {
  it("does not hold its relayer for ever: another worker takes it over and completes the request once", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const treasury = fx.deployment.treasuryAddress;
    const relayer = relayerAddress(fx.relayerKeys[0]!);

    // A paused treasury keeps the request approved: every relay pass locks the relayer, claims the request and
    // reads the treasury inside its transaction.
    const paused = await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "pause" });
    await fx.clients.waitForTransactionReceipt({ hash: paused });
    const a = spawnWorker(fx, { WORKER_INTERVAL_MS: "200" });
    frozenWorker = a;
    onTestFailed(() => {
      process.stderr.write(`\n--- worker A (frozen, pid ${a.pid})\n${a.output().split("\n").slice(-40).join("\n")}\n`);
    });
    const { id, wallet } = await createRequest(fx);
    await waitFor("the request to be approved", async () => (await readRequest(fx, id)).status === "approved");

    // The chain stops answering: the next relay pass waits on the treasury read with the locks held. Worker A is
    // frozen right there (checked: the lock outlives the freeze), then the chain comes back.
    process.kill(fx.anvil.pid, "SIGSTOP");
    anvilStopped = true;
    await waitFor(
      "worker A frozen while holding the relayer's row lock",
      async () => {
        if (!(await relayerRowLocked(relayer))) return false;
        a.process.kill("SIGSTOP");
        await new Promise((r) => setTimeout(r, 300));
        if (await relayerRowLocked(relayer)) return true;
        a.process.kill("SIGCONT");
        return false;
      },
      60_000,
      50,
    );
    process.kill(fx.anvil.pid, "SIGCONT");
    anvilStopped = false;
    const unpaused = await owner.writeContract({ address: treasury, abi: treasuryAbi, functionName: "unpause" });
    await fx.clients.waitForTransactionReceipt({ hash: unpaused });

    const before = await fx.clients.getBalance({ address: wallet });
    // Worker B's lines as it would write them (every level): what it waited on, and when.
    const bLines: string[] = [];
    onTestFailed(() => {
      process.stderr.write(`\n--- worker B (in process)\n${bLines.slice(-80).join("")}`);
    });
    other = await startInProcessWorker(
      fx,
      {},
      {},
      createLogger({ test: "worker B" }, (line) => void (bLines.push(line) > 200 && bLines.shift())),
    );
    await waitFor("the request to complete (worker A still frozen)", async () => (await readRequest(fx, id)).status === "completed", 90_000, 250);
    expect(a.process.signalCode).toBeNull();
    const lease = await fx.database.db.execute<{ owner: string }>(sql`SELECT lease_owner AS owner FROM relayer_accounts WHERE address = ${relayer}`);
    expect(lease[0]!.owner).toBe(other.workerId);
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(before + 10n ** 16n);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
  }, 180_000);
});
