import { eq, sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseTransaction, type Abi, type Hex } from "viem";
import { compileTestContract } from "@/contracts/test-helpers";
import { pauseSponsorships, resumeSponsorships } from "@/lib/admin/controls";
import { blockWalletAsAdministrator, unblockWalletAsAdministrator } from "@/lib/admin/wallets";
import { LOCAL_DEPLOYER_KEY } from "@/lib/config";
import { readIsSponsored } from "@/lib/chain/registry";
import { relayerAccounts, relayerNonceFills, type AdminSession } from "@/db/schema";
import { startRpcProxy } from "@/test/rpc-proxy";
import type { RunningWorker } from "./worker";
import {
  SPONSOR_AMOUNT,
  anvilRpc,
  chainNonces,
  createRequest,
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
 * Stuck, lost and missing nonces (issue 4 "Stuck", "Safety"), on a real anvil whose mining the tests pause
 * (evm_setAutomine false: transactions wait in the pool until evm_mine) and whose pool they can make lose a
 * transaction (anvil_dropTransaction).
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let relayer: `0x${string}`;
const refusing = compileTestContract("RefusingWallet.sol", "RefusingWallet");
const operator = { session: { id: "00000000-0000-4000-8000-00000000ad03" } as AdminSession, ipAddress: null };

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

beforeAll(async () => {
  relayer = relayerAddress(fx.relayerKeys[0]!);
});

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await anvilRpc(fx, "evm_setAutomine", [true]);
});

const waitStatus = (id: string, status: string, timeoutMs = 20_000) => waitForStatus(fx, id, status, timeoutMs);

/**
 * Once a first request has completed (the relayer's nonces are in use), a nonce is assigned and lost before anything
 * is stored for it (as if its transaction never existed): a hole every later nonce waits behind. Answers it.
 */
async function openHole(): Promise<number> {
  const warm = await createRequest(fx);
  await waitStatus(warm.id, "completed");
  const [account] = await fx.database.db
    .update(relayerAccounts)
    .set({ nextNonce: sql`${relayerAccounts.nextNonce} + 1` })
    .where(eq(relayerAccounts.address, relayer))
    .returning();
  return account!.nextNonce - 1;
}

async function pauseMining() {
  await anvilRpc(fx, "evm_setAutomine", [false]);
  await anvilRpc(fx, "evm_setIntervalMining", [0]);
}

async function resumeMining() {
  await anvilRpc(fx, "evm_mine");
  await anvilRpc(fx, "evm_setAutomine", [true]);
}

describe("nonce management", () => {
  it("replaces a stuck transaction although the chain answers HTTP 429 every 1.2 s (a rate-limited provider): only the time it could not be asked is not counted", async () => {
    let last = performance.now();
    let limited = 0;
    const proxy = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
      const call = JSON.parse(body) as { method?: string };
      if (Array.isArray(call) || call.method !== "eth_blockNumber" || performance.now() - last < 1_200) return undefined;
      last = performance.now();
      limited++;
      return { status: 429, contentType: "text/plain", body: "Too Many Requests" };
    });
    try {
      await pauseMining();
      const { id } = await createRequest(fx);
      worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, RELAY_TIMEOUT_MS: "2000" });
      // Before: the count restarted at the end of every outage, and with one 429 in every 1.2 s it never reached 2 s.
      await waitFor("a replacement (attempt 2) to be stored", async () => ((await readRelays(fx, id)).length >= 2 ? true : undefined), 20_000);
      expect(limited).toBeGreaterThan(1);
      await resumeMining();
      await waitStatus(id, "completed");
    } finally {
      await worker?.stop();
      worker = undefined;
      await proxy.close();
    }
  });

  it("replaces a transaction not mined within RELAY_TIMEOUT_MS at the same nonce with higher fees; the replacement is mined and the request completes once", async () => {
    await pauseMining();
    const { id, wallet } = await createRequest(fx);
    const before = await fx.clients.getBalance({ address: wallet });
    worker = await startInProcessWorker(fx, { RELAY_TIMEOUT_MS: "1500" });

    const [first, second] = await waitFor("a replacement (attempt 2) to be submitted", async () => {
      const relays = await readRelays(fx, id);
      return relays.length === 2 && relays[1]!.status === "submitted" ? relays : undefined;
    });
    // The replaced attempt stays open until the nonce is settled: it could still be the one mined.
    expect(first!.status).toBe("submitted");
    expect(second!.nonce).toBe(first!.nonce);
    expect(second!.relayerAddress).toBe(first!.relayerAddress);
    expect(second!.transactionHash).not.toBe(first!.transactionHash);
    // Both fees at least +10% (a node refuses a cheaper replacement).
    expect(second!.maxFeePerGas! * 10n).toBeGreaterThanOrEqual(first!.maxFeePerGas! * 11n);
    expect(second!.maxPriorityFeePerGas! * 10n).toBeGreaterThanOrEqual(first!.maxPriorityFeePerGas! * 11n);
    expect((await readRequest(fx, id)).status).toBe("relayed");

    await resumeMining();
    await waitStatus(id, "completed");
    const relays = await readRelays(fx, id);
    expect(relays.filter((r) => r.status === "confirmed").map((r) => r.relayAttempt)).toEqual([2]);
    expect(relays[0]!.status).toBe("failed");
    expect(relays[0]!.failureReason).toMatch(/^superseded: attempt 2 \(0x[0-9a-f]{64}\) was mined at nonce \d+/);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(before + SPONSOR_AMOUNT);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
  });

  it("cancels the last attempt when it is still unmined (a fill at its nonce) and then fails the request, paying nothing", async () => {
    await pauseMining();
    const { id, wallet } = await createRequest(fx);
    worker = await startInProcessWorker(fx, { RELAY_TIMEOUT_MS: "1000", MAX_RELAY_ATTEMPTS: "2" });

    const fill = await waitFor("a cancelling fill", async () => {
      const [row] = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.sponsorshipRequestId, id));
      return row?.status === "submitted" ? row : undefined;
    });
    const relays = await readRelays(fx, id);
    expect(relays).toHaveLength(2);
    expect(fill.nonce).toBe(relays[0]!.nonce);
    expect(fill.maxFeePerGas * 10n).toBeGreaterThanOrEqual(relays[1]!.maxFeePerGas! * 11n);

    await resumeMining();
    const row = await waitStatus(id, "failed");
    expect(row.failureReason).toMatch(/after 2 attempts: none was mined within the relay timeout; the last was cancelled/);
    const after = await readRelays(fx, id);
    expect(after.map((r) => r.status)).toEqual(["failed", "failed"]);
    expect(after[1]!.failureReason).toMatch(/^cancelled: nonce \d+ was filled by 0x/);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, wallet)).toBe(false);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toEqual([]);
    const [settled] = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.id, fill.id));
    expect(settled!.status).toBe("confirmed");
  });

  it("cancels a stuck attempt whose wallet an administrator blocked after it was sent, rather than pay it again; the request waits until the block is lifted", async () => {
    const admin = { session: { id: "00000000-0000-4000-8000-00000000ad02" } as AdminSession, ipAddress: null };
    await pauseMining();
    const { id, wallet } = await createRequest(fx);
    // Time enough for the block to land before the attempt counts as stuck, on a loaded machine too.
    worker = await startInProcessWorker(fx, { RELAY_TIMEOUT_MS: "3000" });
    await waitFor("attempt 1 to be submitted", async () => ((await readRelays(fx, id))[0]?.status === "submitted" ? true : undefined));
    await blockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: abuse seen after the relay was sent" });

    // Not mined within RELAY_TIMEOUT_MS: its nonce is cancelled by a fill, not replaced by a second payment.
    const fill = await waitFor("a cancelling fill", async () => {
      const [row] = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.sponsorshipRequestId, id));
      return row?.status === "submitted" ? row : undefined;
    });
    expect(fill.reason).toMatch(/its wallet is blocked by an administrator/);
    expect((await readRelays(fx, id)).map((r) => r.relayAttempt)).toEqual([1]);

    await resumeMining();
    await waitFor("the cancel to be settled", async () => ((await readRelays(fx, id))[0]?.status === "failed" ? true : undefined));
    expect((await readRelays(fx, id))[0]!.failureReason).toMatch(/^cancelled: nonce \d+ was filled by 0x/);
    expect((await readRequest(fx, id)).status).toBe("relayed");
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toEqual([]);
    // Confirm passes go by (one more block): while the block lasts the relay stage makes no next attempt.
    await anvilRpc(fx, "evm_mine");
    const later = await createRequest(fx);
    await waitStatus(later.id, "completed");
    expect(await readRelays(fx, id)).toHaveLength(1);

    await unblockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: cleared" });
    await waitStatus(id, "completed");
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([
      [1, "failed"],
      [2, "confirmed"],
    ]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.requestId === id)).toHaveLength(1);
  });

  it("re-broadcasts a stored transaction the node lost (nonce gap) from its stored bytes", async () => {
    await pauseMining();
    worker = await startInProcessWorker(fx);
    const a = await createRequest(fx);
    const [lost] = await waitFor("the first request's attempt", async () => {
      const relays = await readRelays(fx, a.id);
      return relays[0]?.status === "submitted" ? relays : undefined;
    });
    const b = await createRequest(fx);
    await waitFor("the second request's attempt", async () => (await readRelays(fx, b.id))[0]?.status === "submitted");

    // The node forgets the first transaction: the second now waits behind a gap.
    await anvilRpc(fx, "anvil_dropTransaction", [lost!.transactionHash]);
    await waitFor("the worker to put the lost transaction back", async () => {
      const nonces = await chainNonces(fx, relayer);
      return nonces.pending === lost!.nonce! + 2;
    });
    await resumeMining();
    await waitStatus(a.id, "completed");
    await waitStatus(b.id, "completed");
    // The same transaction (same hash, attempt 1) was mined, not a new one.
    const relays = await readRelays(fx, a.id);
    expect(relays.map((r) => [r.relayAttempt, r.status, r.transactionHash])).toEqual([[1, "confirmed", lost!.transactionHash]]);
  });

  it("fills a nonce that was assigned but that nothing holds, so later nonces are not held back", async () => {
    worker = await startInProcessWorker(fx);
    const hole = await openHole();

    const { id } = await createRequest(fx);
    const done = await waitStatus(id, "completed", 30_000);
    expect(done.status).toBe("completed");
    expect((await readRelays(fx, id))[0]!.nonce).toBe(hole + 1);
    // The fill was mined before the request's transaction (nonce order), but a confirm pass commits the successes
    // first and each fill in a transaction of its own after them (worker/stages/confirm/settle.ts): the request can be
    // seen completed a moment before the fill is seen confirmed.
    const fills = await waitFor("the fill to be settled", async () => {
      const rows = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.nonce, hole));
      return rows.every((f) => f.status !== "submitted") ? rows : undefined;
    });
    expect(fills.map((f) => [f.relayerAddress, f.status])).toEqual([[relayer, "confirmed"]]);
    const nonces = await chainNonces(fx, relayer);
    expect(nonces).toEqual({ latest: hole + 2, pending: hole + 2 });
  });

  it("fills a hole again after its fill was refused, though the fees have not moved (a distinct transaction, not the stored one)", async () => {
    // A node that refuses the first fill it is sent: the fill fails, the hole stays, and it is filled again in the
    // same block, at the same fees. Signing is deterministic: before, that second fill was the same transaction, its
    // insert failed on the unique hash, and the confirm stage failed at every pass while everything behind waited.
    let refusedFills = 0;
    const proxy = await startRpcProxy(fx.anvil.rpcUrl, (body) => {
      const parsed = JSON.parse(body) as { id: number; method: string; params?: unknown[] } | { id: number; method: string; params?: unknown[] }[];
      const calls = Array.isArray(parsed) ? parsed : [parsed];
      const fill = calls.find(
        (c) => c.method === "eth_sendRawTransaction" && parseTransaction(c.params![0] as Hex).to?.toLowerCase() === relayer.toLowerCase(),
      );
      if (!fill || refusedFills > 0) return undefined;
      refusedFills++;
      const answer = (c: { id: number }) => ({ jsonrpc: "2.0", id: c.id, error: { code: -32000, message: "transaction underpriced" } });
      return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? calls.map(answer) : answer(calls[0]!)) };
    });
    try {
      worker = await startInProcessWorker(fx, { RPC_URL: proxy.url });
      const hole = await openHole();
      const { id } = await createRequest(fx);
      await waitStatus(id, "completed", 30_000);
      expect(refusedFills).toBe(1);
      const fills = await waitFor("the second fill to be settled", async () => {
        const rows = await fx.database.db.select().from(relayerNonceFills).where(eq(relayerNonceFills.nonce, hole));
        return rows.length === 2 && rows.every((f) => f.status !== "submitted" && f.status !== "queued") ? rows : undefined;
      });
      expect(fills.map((f) => f.status).sort()).toEqual(["confirmed", "failed"]);
      expect(new Set(fills.map((f) => f.maxFeePerGas)).size).toBe(1);
    } finally {
      await worker?.stop();
      worker = undefined;
      await proxy.close();
    }
  });

  it("moves past nonces the relayer key spent outside the service instead of colliding with them", async () => {
    worker = await startInProcessWorker(fx);
    const running = worker;
    const warm = await createRequest(fx);
    await waitStatus(warm.id, "completed");
    // Someone sends three transactions with the relayer's key behind the service's back.
    const outsider = fx.clients.walletClient(fx.relayerKeys[0]!);
    for (let i = 0; i < 3; i++) {
      const hash = await outsider.sendTransaction({ to: relayer, value: 0n });
      await fx.clients.waitForTransactionReceipt({ hash });
    }
    const { latest } = await chainNonces(fx, relayer);
    await waitFor("the worker to move its next nonce past them", async () => {
      const [account] = await running.ctx.db.select().from(relayerAccounts).where(eq(relayerAccounts.address, relayer));
      return account!.nextNonce === latest;
    });
    const { id } = await createRequest(fx);
    await waitStatus(id, "completed");
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.nonce])).toEqual([[1, latest]]);
  });

  it("sends again, never fills over, a confirmed transaction whose block the chain lost (a local chain back from an older dump)", async () => {
    worker = await startInProcessWorker(fx);
    const fillsBefore = (await fx.database.db.select().from(relayerNonceFills)).length;
    const snapshot = await anvilRpc<string>(fx, "evm_snapshot");
    const lost = await createRequest(fx);
    await waitStatus(lost.id, "completed");
    // The block that paid it is gone; the database holds the request completed, its transaction confirmed.
    await anvilRpc(fx, "evm_revert", [snapshot]);
    expect(await readIsSponsored(fx.clients, fx.deployment.registryAddress, lost.wallet)).toBe(false);
    // The next request's nonce is above the lost one: it waits behind the gap until the gap is dealt with.
    const next = await createRequest(fx);
    await waitStatus(next.id, "completed", 30_000);
    // Before: the lost nonce was filled (a transfer to itself), and the first wallet was never paid.
    const paid = (await readSponsoredEvents(fx)).map((e) => e.wallet.toLowerCase());
    expect(paid.filter((w) => w === lost.wallet.toLowerCase())).toHaveLength(1);
    expect(paid.filter((w) => w === next.wallet.toLowerCase())).toHaveLength(1);
    expect((await fx.database.db.select().from(relayerNonceFills)).length).toBe(fillsBefore);
  });

  it("fills the nonce of a reverted attempt whose block the chain lost, then sends the confirmed one after it again; what waits behind the gap is not re-priced", async () => {
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    const deployed = await fx.clients.waitForTransactionReceipt({
      hash: await owner.deployContract({ abi: refusing.abi, bytecode: refusing.bytecode, args: [true] }),
    });
    const refusingWallet = deployed.contractAddress!.toLowerCase() as `0x${string}`;
    // Reviewed while it still took payments, so the request is approved; it refuses by the time its relay is mined.
    await fx.clients.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: refusingWallet, abi: refusing.abi as Abi, functionName: "setRefusing", args: [false] }),
    });
    const refused = await createRequest(fx, refusingWallet);
    await pauseSponsorships(fx.database.db, operator, { reason: "test: hold relays" });
    worker = await startInProcessWorker(fx, { RELAY_TIMEOUT_MS: "2000" });
    await waitStatus(refused.id, "approved");
    await fx.clients.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: refusingWallet, abi: refusing.abi as Abi, functionName: "setRefusing", args: [true] }),
    });
    const snapshot = await anvilRpc<string>(fx, "evm_snapshot");
    const start = await chainNonces(fx, relayer);
    await resumeSponsorships(fx.database.db, operator);
    // The reverted attempt at the first nonce, then a paid one after it.
    await waitStatus(refused.id, "failed");
    const paid = await createRequest(fx);
    await waitStatus(paid.id, "completed");
    const [revertedAt] = (await readRelays(fx, refused.id)).map((r) => r.nonce);
    expect(revertedAt).toBe(start.latest);
    // The chain loses both blocks; the database holds the first nonce failed (mined, reverted), the second confirmed.
    await anvilRpc(fx, "evm_revert", [snapshot]);
    expect((await chainNonces(fx, relayer)).latest).toBe(start.latest);
    const fillsBefore = (await fx.database.db.select().from(relayerNonceFills)).length;
    const next = await createRequest(fx);

    // Before: the confirmed one was sent again over the unfilled gap for ever, the next request waited behind it,
    // and its nonce was cancelled and re-priced every RELAY_TIMEOUT_MS.
    await waitStatus(next.id, "completed", 30_000);
    const paidWallets = (await readSponsoredEvents(fx)).map((e) => e.wallet.toLowerCase());
    expect(paidWallets.filter((w) => w === paid.wallet.toLowerCase())).toHaveLength(1);
    const fills = (await fx.database.db.select().from(relayerNonceFills)).slice(fillsBefore);
    expect(fills.map((f) => f.nonce)).toEqual([start.latest]);
    expect((await readRelays(fx, next.id)).map((r) => r.status)).toEqual(["confirmed"]);
  });
});
