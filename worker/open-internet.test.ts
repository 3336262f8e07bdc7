import { sql } from "drizzle-orm";
import { toFunctionSelector, type Abi } from "viem";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { compileTestContract } from "@/contracts/test-helpers";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { pauseSponsorships, resumeSponsorships } from "@/lib/admin/controls";
import { blockWalletAsAdministrator, unblockWalletAsAdministrator } from "@/lib/admin/wallets";
import { createSponsorshipRequest } from "@/lib/sponsorship/create-request";
import { SponsorshipError } from "@/lib/sponsorship/errors";
import { registerWallet } from "@/lib/sponsorship/wallets";
import type { AdminSession } from "@/db/schema";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";
import type { WorkerSettings } from "./context";
import type { RunningWorker } from "./worker";
import {
  anvilRpc,
  createRequest,
  randomWallet,
  readRelays,
  readRequest,
  readSponsoredEvents,
  relayerAddress,
  sponsorOnChain,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
  waitForStatus,
} from "@/test/worker-fixture";

/**
 * The worker's part of "On the open internet" (decisions.md): the pause holds relays back, a wallet that cannot be
 * paid is rejected at review with nothing sent (and fails at once if it starts refusing after review), and the
 * registry's mirror lets creation refuse a wallet sponsored on-chain without a chain call. Real PostgreSQL, real
 * anvil (each transaction mined at once), workers in this process; transactions counted through an RPC proxy.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let proxy: RpcProxy;
const sent: string[] = [];
/** While set, every eth_call of `sponsor` (review's dry run, the replay of a revert) is answered 503 and counted here. */
let refuseCalls: { refused: number } | undefined;
/**
 * While set, raw transactions are handled as `"lost"` (passed on to the node, then answered 503: the node took them,
 * the worker hears an outage), `"internal"` (passed on, then answered JSON-RPC's -32603 "Internal error", as a hosted
 * provider's gateway does), `"failing"` (answered so, and not passed on) or `"refused"` (answered "transaction underpriced", a refusal for good; `onRefusal`
 * runs first). Either way `seen` counts them.
 */
let sends: { mode: "lost" | "internal" | "failing" | "refused"; seen: number; onRefusal?: () => Promise<void> } | undefined;
/**
 * While set, every eth_call of `selector` (default `sponsor`: review's dry run) waits for `released` before it is
 * passed on; `held` counts them.
 */
let holdCalls: { selector?: string; held: number; released: Promise<void>; release: () => void } | undefined;
const SPONSOR_SELECTOR = toFunctionSelector("sponsor(address,bytes32)");
/** The relay stage's check of its relayers (relayChainState), asked while its batch's requests are locked. */
const IS_RELAYER_SELECTOR = toFunctionSelector("isRelayer(address)");
const deployer = relayerAddress(LOCAL_DEPLOYER_KEY);
const refusing = compileTestContract("RefusingWallet.sol", "RefusingWallet");
const session = { id: "00000000-0000-4000-8000-00000000ad01" } as AdminSession;

setUpPipelineFixture({ blockTime: 0, relayers: 1, extraRelayers: [deployer] }, (started) => (fx = started));

beforeAll(async () => {
  // Every raw transaction the worker hands to the chain passes here.
  proxy = await startRpcProxy(fx.anvil.rpcUrl, async (body) => {
    const calls = [JSON.parse(body)].flat() as { method: string; params: unknown[] }[];
    const callOf = (selector: string) => (call: { method: string; params: unknown[] }) =>
      call.method === "eth_call" &&
      String((call.params[0] as { data?: string; input?: string }).data ?? (call.params[0] as { input?: string }).input).startsWith(selector);
    const sponsorCall = callOf(SPONSOR_SELECTOR);
    if (refuseCalls && calls.some(sponsorCall)) {
      refuseCalls.refused++;
      return { status: 503, contentType: "text/plain", body: "service unavailable" };
    }
    if (sends && calls.some((call) => call.method === "eth_sendRawTransaction")) {
      sends.seen++;
      if (sends.mode === "lost") {
        await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
        return { status: 503, contentType: "text/plain", body: "service unavailable" };
      }
      if (sends.mode === "internal" || sends.mode === "failing") {
        // "failing": a gateway that answers every broadcast -32603 and passes nothing on.
        if (sends.mode === "internal") await fetch(fx.anvil.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body });
        const failure = (call: { id?: unknown }) => ({ jsonrpc: "2.0", id: call.id, error: { code: -32603, message: "Internal error" } });
        const parsed = JSON.parse(body) as { id?: unknown } | { id?: unknown }[];
        return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? parsed.map(failure) : failure(parsed)) };
      }
      await sends.onRefusal?.();
      const refusal = (call: { id?: unknown }) => ({ jsonrpc: "2.0", id: call.id, error: { code: -32000, message: "transaction underpriced" } });
      const parsed = JSON.parse(body) as { id?: unknown } | { id?: unknown }[];
      return { status: 200, body: JSON.stringify(Array.isArray(parsed) ? parsed.map(refusal) : refusal(parsed)) };
    }
    if (holdCalls && calls.some(callOf(holdCalls.selector ?? SPONSOR_SELECTOR))) {
      holdCalls.held++;
      return holdCalls.released.then(() => undefined);
    }
    for (const call of calls) {
      if (call.method === "eth_sendRawTransaction") sent.push(String(call.params[0]));
    }
    return undefined;
  });
});

afterEach(async () => {
  // A test that failed before it released them does not leave the worker's stop waiting on held calls.
  holdCalls?.release();
  holdCalls = undefined;
  sends = undefined;
  await worker?.stop();
  worker = undefined;
  refuseCalls = undefined;
  await anvilRpc(fx, "evm_setAutomine", [true]);
  // A test that failed half-way does not leave the next one paused, nor a paused treasury.
  await resumeSponsorships(fx.database.db, { session, ipAddress: null });
  if (await fx.clients.readContract({ address: fx.deployment.treasuryAddress, abi: treasuryAbi, functionName: "paused" })) {
    await fx.clients.waitForTransactionReceipt({ hash: await treasuryCall("unpause") });
  }
});

afterAll(async () => {
  await proxy?.close();
});

const startWorker = () => startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200" });

const waitStatus = (id: string, status: string, timeoutMs = 30_000) => waitForStatus(fx, id, status, timeoutMs);

async function deployRefusingWallet(refuses: boolean): Promise<`0x${string}`> {
  const deployerClient = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
  const hash = await deployerClient.deployContract({ abi: refusing.abi, bytecode: refusing.bytecode, args: [refuses] });
  const receipt = await fx.clients.waitForTransactionReceipt({ hash });
  return receipt.contractAddress!.toLowerCase() as `0x${string}`;
}

describe("a wallet that cannot be paid", () => {
  it("is rejected payment_refused at review, and not one transaction for it is sent or mined", async () => {
    const wallet = await deployRefusingWallet(true);
    const { id } = await createRequest(fx, wallet);
    const sentBefore = sent.length;
    worker = await startWorker();

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("payment_refused");
    expect(await readRelays(fx, id)).toEqual([]);
    expect(sent.length - sentBefore).toBe(0);
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toEqual([]);
    expect(await fx.clients.getBalance({ address: wallet })).toBe(0n);
  });

  it("is rejected payment_refused at review also when the relayer it would be simulated from is not authorised by the treasury", async () => {
    // A second key the treasury never authorised, whose address sorts before the fixture's relayer: the first one
    // leased or configured, which the dry run used. Its NotRelayer hid the refusal, the request was approved, and its
    // relay reverted on-chain (gas spent) before it failed.
    const unauthorised = LOCAL_RELAYER_KEYS[1]!;
    expect(relayerAddress(unauthorised).toLowerCase() < relayerAddress(fx.relayerKeys[0]!).toLowerCase()).toBe(true);
    const wallet = await deployRefusingWallet(true);
    const { id } = await createRequest(fx, wallet);
    const sentBefore = sent.length;
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", RELAYER_PRIVATE_KEYS: `${unauthorised},${fx.relayerKeys[0]}` });

    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("payment_refused");
    expect(await readRelays(fx, id)).toEqual([]);
    expect(sent.length - sentBefore).toBe(0);
  });

  it("is rejected payment_refused at review when it is the zero address (ZeroAddress), with nothing sent", async () => {
    const zero = "0x0000000000000000000000000000000000000000";
    const { id } = await createRequest(fx, zero);
    const sentBefore = sent.length;
    worker = await startWorker();

    // Before: approved, then five reverted transactions on the service's gas, then failed.
    const row = await waitStatus(id, "rejected");
    expect(row.eligibilityReason).toBe("payment_refused");
    expect(await readRelays(fx, id)).toEqual([]);
    expect(sent.length - sentBefore).toBe(0);
  });

  it("fails at once when, after review, its receive starts needing more gas than a relay gives (the revert replayed with the relay's gas limit)", async () => {
    const wallet = await deployRefusingWallet(false);
    const { id } = await createRequest(fx, wallet);
    await pauseSponsorships(fx.database.db, { session, ipAddress: null }, { reason: "test: hold relays" });
    worker = await startWorker();
    await waitStatus(id, "approved");
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    await fx.clients.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: wallet, abi: refusing.abi as Abi, functionName: "setHungry", args: [true] }),
    });
    await resumeSponsorships(fx.database.db, { session, ipAddress: null });

    // Before: the replay ran with the node's default gas, succeeded, and the request was tried five times.
    const row = await waitStatus(id, "failed");
    expect(row.failureReason).toMatch(/payment_refused/);
    expect(await readRelays(fx, id)).toHaveLength(1);
  });

  it("fails at once, on its first attempt, when it starts refusing after review (no retry can cure it)", async () => {
    const wallet = await deployRefusingWallet(false);
    const { id } = await createRequest(fx, wallet);
    // Paused, the request is reviewed (approved) but nothing is relayed: the wallet turns to refusing meanwhile.
    await pauseSponsorships(fx.database.db, { session, ipAddress: null }, { reason: "test: hold relays" });
    worker = await startWorker();
    await waitStatus(id, "approved");
    const owner = fx.clients.walletClient(LOCAL_DEPLOYER_KEY);
    await fx.clients.waitForTransactionReceipt({
      hash: await owner.writeContract({ address: wallet, abi: refusing.abi as Abi, functionName: "setRefusing", args: [true] }),
    });
    await resumeSponsorships(fx.database.db, { session, ipAddress: null });

    const row = await waitStatus(id, "failed");
    expect(row.failureReason).toMatch(/payment_refused/);
    const relays = await readRelays(fx, id);
    expect(relays).toHaveLength(1);
    expect(relays[0]!.status).toBe("failed");
  });
});

/**
 * Mining paused, a worker with `env` (MAX_RELAY_ATTEMPTS, CONFIRMATIONS, ...) through the proxy, a request whose
 * attempt 1 waits in the node's pool; then the owner pauses the treasury with a higher tip, so the pause comes first
 * in the next block and attempt 1 reverts TreasuryPaused there. Nothing is mined yet: the caller mines (afterEach
 * turns automine back on whatever happens).
 */
async function firstAttemptMeetsThePause(env: Record<string, string>, settings: Partial<WorkerSettings> = {}) {
  const { id, wallet } = await createRequest(fx);
  await anvilRpc(fx, "evm_setAutomine", [false]);
  worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", ...env }, settings);
  await waitFor("attempt 1 to be sent", async () => ((await readRelays(fx, id)).some((r) => r.status === "submitted") ? true : undefined));
  await treasuryCall("pause", { maxPriorityFeePerGas: 50_000_000_000n, maxFeePerGas: 200_000_000_000n });
  return { id, wallet };
}

/** The owner's `pause` or `unpause`, sent (mined only if automine is on). */
function treasuryCall(functionName: "pause" | "unpause", fees: { maxPriorityFeePerGas?: bigint; maxFeePerGas?: bigint } = {}) {
  return fx.clients.walletClient(LOCAL_DEPLOYER_KEY).writeContract({ address: fx.deployment.treasuryAddress, abi: treasuryAbi, functionName, ...fees });
}

const attempts = async (id: string) => (await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status]);

describe("a revert of the service's own making", () => {
  it("burns no attempt: a relay mined after the treasury was paused fails as service_state, and the next attempt completes the request (MAX_RELAY_ATTEMPTS=1)", async () => {
    // With one attempt allowed, a burned attempt would fail the request: this one must not.
    const { id, wallet } = await firstAttemptMeetsThePause({ MAX_RELAY_ATTEMPTS: "1" });
    await anvilRpc(fx, "evm_mine");
    await anvilRpc(fx, "evm_setAutomine", [true]);
    const failed = await waitFor("attempt 1 to fail", async () => (await readRelays(fx, id)).find((r) => r.status === "failed"));
    expect(failed.failureReason).toMatch(/^service_state: reverted: TreasuryPaused/);
    // The request waits (relayed, no open attempt) while the treasury is paused; nothing is failed.
    await waitFor("the relay stage to wait for the treasury", async () => (worker!.ctx.status.relayWaiting === "treasury_paused" ? true : undefined));
    expect((await readRequest(fx, id)).status).toBe("relayed");

    await fx.clients.waitForTransactionReceipt({ hash: await treasuryCall("unpause") });
    await waitStatus(id, "completed");
    expect(await attempts(id)).toEqual([
      [1, "failed"],
      [2, "confirmed"],
    ]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });

  it("is told from the state of its own block, not the latest, when the owner undid its cause before it was settled (CONFIRMATIONS=2)", async () => {
    const { id, wallet } = await firstAttemptMeetsThePause({ MAX_RELAY_ATTEMPTS: "1", CONFIRMATIONS: "2" });
    await anvilRpc(fx, "evm_mine"); // block B: the pause, then attempt 1, which reverts
    // Block B + 1, the one that makes B deep enough to settle: the owner resumes. Replayed against the latest state
    // the call succeeded, so the revert was read as the wallet's or the call's and burned the only attempt.
    await treasuryCall("unpause");
    await anvilRpc(fx, "evm_mine");
    const failed = await waitFor("attempt 1 to be settled", async () => (await readRelays(fx, id)).find((r) => r.status === "failed"));
    expect(failed.failureReason).toMatch(/^service_state: reverted: TreasuryPaused/);
    await anvilRpc(fx, "evm_setAutomine", [true]);
    // Attempt 2 is mined at once; one more block makes it two deep.
    await waitFor("attempt 2 to be sent", async () =>
      (await readRelays(fx, id)).some((r) => r.relayAttempt === 2 && r.status !== "queued") ? true : undefined,
    );
    await anvilRpc(fx, "evm_mine");
    await waitStatus(id, "completed");
    expect(await attempts(id)).toEqual([
      [1, "failed"],
      [2, "confirmed"],
    ]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });

  it("waits for the node to answer its replay, rather than read it as a revert of the call's own making (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id } = await firstAttemptMeetsThePause({ MAX_RELAY_ATTEMPTS: "1" });
    // The provider fails the replay that tells why it reverted (503) while the revert is mined.
    const outage = (refuseCalls = { refused: 0 });
    try {
      await anvilRpc(fx, "evm_mine");
      const settledOrAskedAgain = await waitFor("attempt 1 to be settled, or its replay asked again", async () => {
        const statuses = (await readRelays(fx, id)).map((r) => r.status);
        return statuses.includes("failed") || outage.refused >= 3 ? statuses : undefined;
      });
      // Before, the refusal was taken for "reason not available" and burned the only attempt: the request failed.
      expect(settledOrAskedAgain).toEqual(["submitted"]);
    } finally {
      refuseCalls = undefined;
    }
    const failed = await waitFor("attempt 1 to be settled", async () => (await readRelays(fx, id)).find((r) => r.status === "failed"));
    expect(failed.failureReason).toMatch(/^service_state: reverted: TreasuryPaused/);
    expect((await readRequest(fx, id)).status).toBe("relayed");
    await anvilRpc(fx, "evm_setAutomine", [true]);
    await fx.clients.waitForTransactionReceipt({ hash: await treasuryCall("unpause") });
    await waitStatus(id, "completed");
  });

  it("is settled as 'reason not available' once a node that never answers the replay has had its patience: the request is not held for ever (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id } = await firstAttemptMeetsThePause({ MAX_RELAY_ATTEMPTS: "1" }, { replayPatienceMs: 1_500 });
    const outage = (refuseCalls = { refused: 0 });
    await anvilRpc(fx, "evm_mine");
    const failed = await waitFor("attempt 1 to be settled", async () => (await readRelays(fx, id)).find((r) => r.status === "failed"), 20_000);
    // Asked, and asked again while it waited; then the revert burned the only attempt, its cause unknown.
    expect(outage.refused).toBeGreaterThanOrEqual(2);
    expect(failed.failureReason).toMatch(/^reverted on-chain \(reason not available: the node did not answer the replay for 1\.5 s\)/);
    expect((await waitStatus(id, "failed")).failureReason).toMatch(/^relay failed after 1 attempts; last: reverted on-chain \(reason not available/);
  });

  it("burns the attempt of a revert whose broadcast answer was lost: mined, so a node took it (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id } = await createRequest(fx);
    await anvilRpc(fx, "evm_setAutomine", [false]);
    const lost = (sends = { mode: "lost", seen: 0 });
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", MAX_RELAY_ATTEMPTS: "1" }, { replayPatienceMs: 1_000 });
    await waitFor("attempt 1 to reach the node", async () => (lost.seen > 0 ? true : undefined));
    expect((await readRelays(fx, id)).map((r) => r.status)).toEqual(["queued"]);
    // The owner's pause comes first in the block, attempt 1 reverts; its replay is refused, so its cause is unknown:
    // a revert that burns the attempt.
    await treasuryCall("pause", { maxPriorityFeePerGas: 50_000_000_000n, maxFeePerGas: 200_000_000_000n });
    refuseCalls = { refused: 0 };
    await anvilRpc(fx, "evm_mine");
    const failed = await waitFor("attempt 1 to be settled", async () => (await readRelays(fx, id)).find((r) => r.status === "failed"), 20_000);
    expect(failed.failureReason).toMatch(/^reverted on-chain \(reason not available/);
    expect(failed.submittedAt).not.toBeNull();
    // Before, the attempt still counted as never broadcast: the request stayed relayed for another attempt.
    expect((await waitStatus(id, "failed")).failureReason).toMatch(/^relay failed after 1 attempts; last: reverted on-chain/);
  });

  it("burns no attempt, and keeps the record, when a provider answers a broadcast with an internal error after passing it on (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id, wallet } = await createRequest(fx);
    const internal = (sends = { mode: "internal", seen: 0 });
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", MAX_RELAY_ATTEMPTS: "1" });
    await waitFor("the broadcast to be answered -32603", async () => (internal.seen > 0 ? true : undefined));
    sends = undefined;
    // Before: "rejected by the node before broadcast: Internal error", the request failed, the wallet paid all the same.
    const row = await waitStatus(id, "completed", 20_000);
    expect(row.failureReason).toBeNull();
    expect((await readRelays(fx, id)).map((r) => r.status)).toEqual(["confirmed"]);
    expect(await fx.clients.getBalance({ address: wallet as `0x${string}` })).toBeGreaterThan(0n);
  });

  it("leaves a later stuck attempt to be replaced at its nonce, numbered after the reverted one, not cancelled as if none were left", async () => {
    const { id, wallet } = await firstAttemptMeetsThePause({ MAX_RELAY_ATTEMPTS: "2", RELAY_TIMEOUT_MS: "1500" });
    await anvilRpc(fx, "evm_mine");
    await waitFor("attempt 1 to fail", async () => ((await readRelays(fx, id)).some((r) => r.status === "failed") ? true : undefined));
    await treasuryCall("unpause");
    await anvilRpc(fx, "evm_mine");
    // Attempt 2 is sent and left unmined past RELAY_TIMEOUT_MS: one attempt of two is burned, one is left.
    const replaced = await waitFor("attempt 2 to be replaced or cancelled", async () => {
      const relays = await readRelays(fx, id);
      const fills = await fx.database.db.$client<{ n: number }[]>`SELECT count(*)::int AS n FROM relayer_nonce_fills WHERE sponsorship_request_id = ${id}`;
      return relays.length >= 3 || fills[0]!.n > 0 ? { relays, fills: fills[0]!.n } : undefined;
    });
    // Before, the burned count (1) was compared with the attempt number at the nonce (2): the nonce was cancelled.
    expect(replaced.fills).toBe(0);
    const [, second, third] = replaced.relays;
    expect([third?.relayAttempt, third?.nonce]).toEqual([3, second?.nonce]);
    await anvilRpc(fx, "evm_mine");
    await anvilRpc(fx, "evm_setAutomine", [true]);
    await waitStatus(id, "completed");
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });
});

describe("the pause", () => {
  it("sends no relay for an approved request while paused, and completes it after resume", async () => {
    const { id, wallet } = await createRequest(fx);
    await pauseSponsorships(fx.database.db, { session, ipAddress: null }, { reason: "test: fee spike" });
    const sentBefore = sent.length;
    worker = await startWorker();
    await waitStatus(id, "approved");
    // Several relay passes go by (the worker polls every 200 ms): still nothing sent, nothing stored.
    await waitFor("the worker to report the pause", async () => (worker!.ctx.status.pause ? true : undefined));
    expect(sent.length - sentBefore).toBe(0);
    expect(await readRelays(fx, id)).toEqual([]);

    await resumeSponsorships(fx.database.db, { session, ipAddress: null });
    await waitStatus(id, "completed");
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });
});

/** Holds the relay stage's chain reads (its batch's requests are locked meanwhile); answers the release. */
function holdRelayChainReads(): () => void {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  holdCalls = { selector: IS_RELAYER_SELECTOR, held: 0, released, release };
  return release;
}

describe("a pause or a block answered while the relay asks the chain", () => {
  const admin = { session, ipAddress: null };

  it("fails a request whose last attempt the node refused at once, even while a pause holds the relay stage back (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id } = await createRequest(fx);
    // The pause lands between the relay's commit and the node's refusal: no relay pass runs after it.
    const refused = (sends = {
      mode: "refused",
      seen: 0,
      onRefusal: async () => void (await pauseSponsorships(fx.database.db, admin, { reason: "test: paused" })),
    });
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", MAX_RELAY_ATTEMPTS: "1" });
    await waitFor("the broadcast to be refused", async () => (refused.seen > 0 ? true : undefined));
    const row = await waitStatus(id, "failed", 10_000);
    expect(row.failureReason).toMatch(/^relay failed after 1 attempts; last: rejected by the node before broadcast: transaction underpriced/);
    expect((await readRelays(fx, id)).map((r) => r.status)).toEqual(["failed"]);
  });

  it("withdraws the batch on a pause: nothing stored or sent, the request waits approved and completes after resume", async () => {
    const release = holdRelayChainReads();
    const { id, wallet } = await createRequest(fx);
    const sentBefore = sent.length;
    worker = await startWorker();
    await waitFor("the relay's chain reads", async () => (holdCalls!.held > 0 ? true : undefined));
    expect((await readRequest(fx, id)).status).toBe("approved");
    // The administrator is answered while the relay batch is open: from then on nothing new may be sent.
    await pauseSponsorships(fx.database.db, admin, { reason: "test: paused while the relay reads the chain" });
    release();
    await waitFor("the worker to report the pause", async () => (worker!.ctx.status.pause ? true : undefined));
    expect(await readRelays(fx, id)).toEqual([]);
    expect(sent.length - sentBefore).toBe(0);
    expect((await readRequest(fx, id)).status).toBe("approved");

    await resumeSponsorships(fx.database.db, admin);
    await waitStatus(id, "completed");
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });

  it("withdraws the batch on an administrator's wallet block: that wallet is not paid, later requests are", async () => {
    const release = holdRelayChainReads();
    // The only request when the relay claims its batch: the held batch is its.
    const { id, wallet } = await createRequest(fx);
    worker = await startWorker();
    await waitFor("the relay's chain reads", async () => (holdCalls!.held > 0 ? true : undefined));
    await blockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: blocked while the relay reads the chain" });
    const other = await createRequest(fx);
    release();
    // Relay passes have run since: the other wallet's request, created after the block, is paid.
    await waitStatus(other.id, "completed");
    expect((await readRequest(fx, id)).status).toBe("approved");
    expect(await readRelays(fx, id)).toEqual([]);
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toEqual([]);

    await unblockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: cleared" });
    await waitStatus(id, "completed");
  });
});

describe("a wallet blocked after its request was reviewed", () => {
  const admin = { session, ipAddress: null };

  it("is not paid while the block lasts: its approved request waits, and completes once the block is lifted", async () => {
    const { id, wallet } = await createRequest(fx);
    await pauseSponsorships(fx.database.db, admin, { reason: "test: approved requests wait" });
    worker = await startWorker();
    await waitStatus(id, "approved");
    await blockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: abuse seen after review" });
    const sentBefore = sent.length;
    await resumeSponsorships(fx.database.db, admin);
    // A request created after it is relayed and completed: relay passes have run since the resume.
    const later = await createRequest(fx);
    await waitStatus(later.id, "completed");
    expect(sent.length - sentBefore).toBe(1);
    expect((await readRequest(fx, id)).status).toBe("approved");
    expect(await readRelays(fx, id)).toEqual([]);

    await unblockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: cleared" });
    await waitStatus(id, "completed");
    expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
  });

  it("is paid despite an automatic block (anyone can set one off for any wallet), once approved", async () => {
    const { id, wallet } = await createRequest(fx);
    await pauseSponsorships(fx.database.db, admin, { reason: "test: approved requests wait" });
    worker = await startWorker();
    await waitStatus(id, "approved");
    await fx.database.db.execute(
      sql`INSERT INTO blocks (subject_type, subject, kind, reason, created_by, expires_at) VALUES ('wallet', ${wallet}, 'automatic', 'test: wallet limit', 'rate_limiter', now() + interval '15 minutes')`,
    );
    await resumeSponsorships(fx.database.db, admin);
    await waitStatus(id, "completed");
  });

  it("is rejected wallet_blocked when the block lands while review is asking the chain, with nothing sent", async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    holdCalls = { held: 0, released, release };
    const { id, wallet } = await createRequest(fx);
    const sentBefore = sent.length;
    worker = await startWorker();
    // Review has claimed the request (its row is locked) and waits for its dry run of `sponsor`.
    await waitFor("review's dry run", async () => (holdCalls!.held > 0 ? true : undefined));
    await blockWalletAsAdministrator(fx.database.db, admin, { walletAddress: wallet, reason: "test: blocked during review" });
    release();
    await waitStatus(id, "rejected");
    expect((await readRequest(fx, id)).eligibilityReason).toBe("wallet_blocked");
    expect(sent.length - sentBefore).toBe(0);
  });
});

describe("the pause and what was already sent", () => {
  it("still confirms a relay sent before the pause: its request completes while paused", async () => {
    const { id, wallet } = await createRequest(fx);
    await anvilRpc(fx, "evm_setAutomine", [false]);
    try {
      worker = await startWorker();
      // Sent, and waiting in the node's pool (no block is mined by itself now).
      await waitFor("attempt 1 to be sent", async () => ((await readRelays(fx, id)).some((r) => r.status === "submitted") ? true : undefined));
      await pauseSponsorships(fx.database.db, { session, ipAddress: null }, { reason: "test: paused with a relay in flight" });
      await waitFor("the worker to see the pause", async () => (worker!.ctx.status.pause ? true : undefined));
      await anvilRpc(fx, "evm_mine");
      // decisions.md: "those already sent are still confirmed or replaced".
      await waitStatus(id, "completed");
      expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
      expect((await readSponsoredEvents(fx)).filter((e) => e.wallet === wallet)).toHaveLength(1);
    } finally {
      await anvilRpc(fx, "evm_setAutomine", [true]);
      await resumeSponsorships(fx.database.db, { session, ipAddress: null });
    }
  });
});

describe("the registry's mirror", () => {
  it("refuses creation for a wallet sponsored on-chain behind the service's back, once the worker has indexed it", async () => {
    const wallet = randomWallet();
    await sponsorOnChain(fx, wallet);
    worker = await startWorker();
    const sql = fx.database.db.$client;
    await waitFor("the mirror to hold the wallet", async () => {
      const rows = await sql`SELECT 1 FROM registry_sponsored_wallets WHERE wallet_address = ${wallet}`;
      return rows.length > 0 ? true : undefined;
    });

    const config = fx.config();
    await registerWallet(fx.database.db, { walletAddress: wallet, ip: "203.0.113.9" }, { config });
    const refusal = await createSponsorshipRequest(
      fx.database.db,
      { walletAddress: wallet, ip: "203.0.113.9", userAgent: null },
      { config, registryAddress: fx.deployment.registryAddress.toLowerCase() },
    ).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(SponsorshipError);
    expect((refusal as SponsorshipError).code).toBe("already_sponsored");
    // Another wallet is created as usual.
    expect((await createRequest(fx)).id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("records a wallet review found sponsored on-chain, which the mirror's events did not reach (before its first block), so creation refuses it next", async () => {
    const sql = fx.database.db.$client;
    const registry = fx.deployment.registryAddress.toLowerCase();
    // The mirror reads nothing more for now: as if the sponsorship lay before the block it started from.
    const [cursor] = await sql<{ next_block: string }[]>`SELECT next_block::text FROM registry_index WHERE registry_address = ${registry}`;
    await sql`INSERT INTO registry_index (registry_address, next_block) VALUES (${registry}, 1000000000000)
      ON CONFLICT (registry_address) DO UPDATE SET next_block = 1000000000000`;
    try {
      const wallet = randomWallet();
      await sponsorOnChain(fx, wallet);
      const { id } = await createRequest(fx, wallet);
      worker = await startWorker();
      await waitStatus(id, "rejected");
      expect((await readRequest(fx, id)).eligibilityReason).toBe("already_sponsored");
      expect(await sql`SELECT 1 FROM registry_sponsored_wallets WHERE registry_address = ${registry} AND wallet_address = ${wallet}`).toHaveLength(1);
      // Before, every new request was created (201), counted against the budget and reviewed again.
      const config = fx.config();
      const refusal = await createSponsorshipRequest(
        fx.database.db,
        { walletAddress: wallet, ip: "203.0.113.10", userAgent: null },
        { config, registryAddress: registry },
      ).catch((error: unknown) => error);
      expect((refusal as SponsorshipError).code).toBe("already_sponsored");
    } finally {
      if (cursor) await sql`UPDATE registry_index SET next_block = ${cursor.next_block}::bigint WHERE registry_address = ${registry}`;
      else await sql`DELETE FROM registry_index WHERE registry_address = ${registry}`;
    }
  });
});

// Last in the file: the refused attempt leaves its nonce unused, a hole the next requests of the relayer wait on
// until the confirm stage fills it.
describe("a node that fails on a broadcast without end", () => {
  it("takes a broadcast a node keeps failing on for RELAY_TIMEOUT_MS as a refusal, so the request is not held for ever (MAX_RELAY_ATTEMPTS=1)", async () => {
    const { id } = await createRequest(fx);
    const failing = (sends = { mode: "failing", seen: 0 });
    worker = await startInProcessWorker(fx, { RPC_URL: proxy.url, WORKER_INTERVAL_MS: "200", MAX_RELAY_ATTEMPTS: "1", RELAY_TIMEOUT_MS: "1500" });
    // Before (with -32603 waited out): broadcast again every 3 s for ever, the request relayed, nothing said.
    const row = await waitStatus(id, "failed", 20_000);
    expect(failing.seen).toBeGreaterThan(1);
    expect(row.failureReason).toMatch(/rejected by the node before broadcast: .*taken as a refusal/);
  });
});
