import { encodeFunctionData, type Address } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterEach, describe, expect, it } from "vitest";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { requestIdHash } from "@/lib/chain/ids";
import type { Anvil } from "@/contracts/anvil";
import { checkHealth } from "@/lib/health";
import { healthResponse } from "@/lib/sponsorship/schemas";
import { chainRpc, startTestChain } from "@/test/chain";
import { keptLog } from "@/test/kept-log";
import { startDownRpcProxy, type DownRpcProxy } from "@/test/rpc-proxy";
import { CHAIN_ID_FRESH_MS } from "@/lib/chain/endpoint-breaker";
import { WorkerChain } from "./chain";
import type { RunningWorker } from "./worker";
import {
  readHeartbeat,
  anvilRpc,
  createRequest,
  readRelays,
  readRequest,
  startInProcessWorker,
  waitFor,
  setUpPipelineFixture,
  type PipelineFixture,
} from "@/test/worker-fixture";

/**
 * decisions.md "Several RPC endpoints": RPC_URL lists endpoints of one chain. Start-up refuses endpoints that answer
 * different chain ids (worker/rpc-endpoints.test.ts), but an endpoint down at start-up was never asked which chain it
 * serves: when it came up serving another (a mainnet URL beside the testnet's), its reads were used, and its higher
 * head left the right endpoint "behind", so every read went to it. Here the second endpoint refuses connections at
 * start-up (test/rpc-proxy.ts `startDownRpcProxy`), then forwards to an anvil of chain 8453 a hundred blocks ahead.
 */

let fx: PipelineFixture;
let worker: RunningWorker | undefined;
let foreign: Anvil | undefined;
let down: DownRpcProxy | undefined;

setUpPipelineFixture({ blockTime: 0, relayers: 1 }, (started) => (fx = started));

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await down?.close();
  down = undefined;
  await foreign?.stop();
  foreign = undefined;
});

const heartbeat = () => readHeartbeat(fx, worker!.workerId);

describe("an RPC endpoint down at start-up that comes up serving another chain", () => {
  it("is asked its chain id before any read, then left aside with one error line naming both ids, shown in the heartbeat and /health; the worker goes on", async () => {
    foreign = await startTestChain({ chainId: 8453 });
    await chainRpc(foreign.rpcUrl, "anvil_mine", ["0x64"]);
    down = await startDownRpcProxy(foreign.rpcUrl);
    const { log, lines } = keptLog();
    const env = { RPC_URL: `${fx.anvil.rpcUrl},${down.url}` };
    worker = await startInProcessWorker(fx, env, {}, log);
    // Start-up read the chain id from the first endpoint; the second was not reached (it cools off for 10 s).
    expect(worker.ctx.chain.endpoints.map((e) => e.reachable)).toEqual([true, false]);

    down.up();
    // A request in flight keeps the maintenance checks (the surveys) at every heartbeat; once the cool-off has ended,
    // one reaches the endpoint that came up.
    const { id } = await createRequest(fx);
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 30_000);
    const second = () => worker!.ctx.chain.endpoints[1]!;
    await waitFor(
      "a survey to reach the endpoint that came up",
      async () => second().reachable && (second().otherChain || second().head !== undefined),
      60_000,
    );

    // The worker goes on with the right endpoint: the next request completes with its one attempt. The endpoint of the
    // other chain was sent the first request's broadcast while its chain id was unknown (every endpoint is, with
    // eth_chainId in the same request; its answer did not count), or asked its chain id with its head by a survey,
    // and since then only its chain id, by each maintenance check (whether it serves this chain again): no read, no
    // broadcast. Before: never asked its chain id, sent every broadcast and surveyed at every check.
    const next = await createRequest(fx);
    await waitFor("the next request to complete", async () => (await readRequest(fx, next.id)).status === "completed", 30_000);
    expect((await readRelays(fx, next.id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    // (At most one broadcast: on a loaded machine the survey may come first, and then it is sent none.)
    const { eth_sendRawTransaction: broadcasts = 0, eth_chainId: chainIds = 0, eth_blockNumber: heads = 0, ...asked } = down.byMethod();
    expect(broadcasts).toBeLessThanOrEqual(1);
    expect([chainIds > 0, heads <= 1, asked]).toEqual([true, true, {}]);

    // Before, its head (100 blocks higher) left the right endpoint behind 3 s later, and every read went to the other
    // chain; now it is known for what it is, and its head was never counted.
    expect(worker.ctx.chain.endpoints.map((e) => [e.behind, e.otherChain, e.chainId])).toEqual([
      [false, false, 31337],
      [false, true, 8453],
    ]);
    const errors = lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      msg: expect.stringMatching(/^RPC endpoint serves another chain/),
      fields: { endpoint: 2, chainId: 8453, expectedChainId: 31337 },
    });

    const beat = await waitFor("a heartbeat naming the endpoint of another chain", async () => {
      const d = await heartbeat();
      return d?.chain.endpoints[1]?.otherChain ? d : undefined;
    });
    expect(beat.chain.endpoints.map((e) => [e.chainId, e.otherChain, e.behind, e.blockNumber])).toEqual([
      [31337, false, false, expect.any(String)],
      [8453, true, false, null],
    ]);

    // /health names it by its position, with the chain it serves; the chain's head is the right endpoint's.
    const head = BigInt(await anvilRpc<string>(fx, "eth_blockNumber"));
    const report = await checkHealth({ db: fx.database.db, config: fx.config(env) });
    healthResponse.parse(report.body);
    expect(report.httpStatus).toBe(200);
    expect(report.body.status).toBe("degraded");
    expect(report.body.checks.chain).toMatchObject({ status: "degraded", code: "endpoints_other_chain", chainId: 31337, blockNumber: head.toString() });
    expect(report.body.checks.chain.endpoints!.map((e) => [e.index, e.status, e.chainId])).toEqual([
      [1, "ok", undefined],
      [2, "other_chain", 8453],
    ]);
  }, 150_000);
});

/**
 * The endpoint's chain id used to be asked once, at start-up. An RPC_URL that later answers for another network (a
 * provider's URL moved to another chain, a node restarted on another genesis) was trusted: with one endpoint, the
 * relay's broadcast was refused ("invalid chain id for signer") and burned an attempt, and its nonces, where the
 * relayer keys are in use too, could move the next nonce on or have a pending transaction taken for dropped. Here
 * the real anvil changes its chain id (`anvil_setChainId`) under a running worker, then back.
 */
describe("the only RPC endpoint moving to another network while the worker runs", () => {
  it("is found by the next broadcast or maintenance check, waited out as an outage with no attempt burned, and used again once it serves this chain again", async () => {
    const { log, lines } = keptLog();
    worker = await startInProcessWorker(fx, {}, {}, log);
    const chainId = worker.ctx.chain.chainId;
    const endpoint = () => worker!.ctx.chain.endpoints[0]!;
    let id: string;
    try {
      await anvilRpc(fx, "anvil_setChainId", [chainId + 1]);
      ({ id } = await createRequest(fx));
      await waitFor("the endpoint to be found serving another chain", async () => endpoint().otherChain, 30_000);
      const beat = await waitFor("a heartbeat naming it, the chain unreachable", async () => {
        const d = await heartbeat();
        return d?.chain.endpoints[0]?.otherChain && !d.chain.reachable ? d : undefined;
      });
      expect([beat.chain.endpoints[0]!.chainId, beat.chain.lastError]).toEqual([chainId + 1, expect.stringMatching(/serves? (another chain|chain)/)]);
      // Nothing decided on its answers: the request waits, any attempt it has still open.
      expect((await readRelays(fx, id)).filter((r) => r.status === "failed")).toEqual([]);
      expect(["pending", "approved", "relayed"]).toContain((await readRequest(fx, id)).status);
    } finally {
      await anvilRpc(fx, "anvil_setChainId", [chainId]);
    }
    await waitFor("the request to complete", async () => (await readRequest(fx, id)).status === "completed", 60_000);
    expect((await readRelays(fx, id)).map((r) => [r.relayAttempt, r.status])).toEqual([[1, "confirmed"]]);
    expect(endpoint()).toMatchObject({ chainId, otherChain: false });
    const told = lines.filter((l) => /^RPC endpoint serves/.test(l.msg)).map((l) => [l.level, l.fields?.chainId]);
    expect(told).toEqual([
      ["error", chainId + 1],
      ["info", chainId],
    ]);
  }, 150_000);
});

/**
 * Between two maintenance checks, the reads whose nonces decide (a relayer's next nonce after a lease, "nonce used and
 * no receipt of ours": dropped) carry the endpoint's chain id in the same HTTP request. Endpoint 1 is an anvil that
 * moves to another chain id after the last check, where the account has sent a transaction; endpoint 2 serves the chain.
 */
describe("reads whose nonces decide", () => {
  it("come from an endpoint that answered this chain's id in the same request: one that moved since the last check is left aside at once", async () => {
    foreign = await startTestChain();
    // The last of anvil's unlocked accounts: nothing else in the fixture sends from it (the deployer, account 0, does).
    const account = (await chainRpc<`0x${string}`[]>(foreign.rpcUrl, "eth_accounts")).at(-1);
    const nonceOn = async (rpcUrl: string) => Number(BigInt(await chainRpc<string>(rpcUrl, "eth_getTransactionCount", [account, "pending"])));
    const theirs = await nonceOn(fx.anvil.rpcUrl);
    // Ahead there: the account has sent two transactions more on that chain.
    for (let i = 0; i < theirs + 2; i++) await chainRpc(foreign.rpcUrl, "eth_sendTransaction", [{ from: account, to: account, value: "0x1" }]);
    const chain = new WorkerChain({
      rpcUrl: [foreign.rpcUrl, fx.anvil.rpcUrl],
      chainId: fx.deployment.chainId,
      registryAddress: fx.deployment.registryAddress,
      treasuryAddress: fx.deployment.treasuryAddress,
    });
    // Both answered the chain's id at start-up, a while ago (longer than CHAIN_ID_FRESH_MS: no survey since).
    chain.breaker.noteChainId(0, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    chain.breaker.noteChainId(1, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    expect(await nonceOn(foreign.rpcUrl)).toBe(theirs + 2);
    await chainRpc(foreign.rpcUrl, "anvil_setChainId", [fx.deployment.chainId + 1]);

    // Before, the first endpoint answered: its nonce (two above the chain's) would have moved the next nonce on.
    expect((await chain.nonces([account!])).get(account!)).toMatchObject({ latest: theirs, pending: theirs });
    expect(chain.endpoints[0]).toMatchObject({ chainId: fx.deployment.chainId + 1, otherChain: true });
    const view = await chain.receiptsWithNonces([], [account!]);
    expect(view?.nonces.get(account!)).toBe(theirs);
  });
});

/**
 * Review's reads (the registry's `areSponsored`, the payments' dry runs) reject requests. Through the failover, an
 * endpoint that moved to another network since the last maintenance check answered that network's registry and
 * wallets. Endpoint 1 is an anvil loaded with this chain's state (`anvil_dumpState`/`anvil_loadState`: the same
 * contracts, the same relayers) that then moves to another chain id, where the wallet is a contract whose `receive`
 * reverts; endpoint 2 serves the chain, where the wallet can be paid. No maintenance check comes in between (one a
 * minute here).
 */
describe("review's reads", () => {
  it("come from an endpoint that answered this chain's id in the same request: a request is not rejected for what another network holds", async () => {
    foreign = await startTestChain();
    await chainRpc(foreign.rpcUrl, "anvil_loadState", [await anvilRpc<string>(fx, "anvil_dumpState")]);
    worker = await startInProcessWorker(fx, { RPC_URL: `${foreign.rpcUrl},${fx.anvil.rpcUrl}` }, { heartbeatMs: 60_000 });
    const endpoints = () => worker!.ctx.chain.endpoints;
    // The start-up check has asked both their chain id, and that answer is no longer fresh (CHAIN_ID_FRESH_MS).
    await waitFor(
      "both endpoints' chain ids to be older than CHAIN_ID_FRESH_MS",
      async () => endpoints().every((e) => e.chainId === fx.deployment.chainId && performance.now() - e.chainIdAtMs > CHAIN_ID_FRESH_MS),
      30_000,
    );
    const wallet = `0x${crypto.randomUUID().replaceAll("-", "").padEnd(40, "7")}` as `0x${string}`;
    await chainRpc(foreign.rpcUrl, "anvil_setChainId", [fx.deployment.chainId + 1]);
    // PUSH0 PUSH0 REVERT: there, every payment to the wallet reverts (TransferFailed).
    await chainRpc(foreign.rpcUrl, "anvil_setCode", [wallet, "0x5f5ffd"]);

    const { id } = await createRequest(fx, wallet);
    const settled = await waitFor(
      "the request to be decided",
      async () => {
        const r = await readRequest(fx, id);
        return ["completed", "rejected", "failed"].includes(r.status) ? r : undefined;
      },
      60_000,
    );
    // Before, the first endpoint answered the dry run: rejected payment_refused.
    expect([settled.status, settled.eligibilityReason]).toEqual(["completed", "eligible"]);
    expect(endpoints()[0]).toMatchObject({ chainId: fx.deployment.chainId + 1, otherChain: true });
  }, 120_000);
});

/**
 * The other reads that decide something between two maintenance checks: a revert's replay (which request it fails,
 * and how), the registry's and treasury's events (the registry mirror, a payment found by its event) and the
 * relayers' balances (whether a refused broadcast burns an attempt; the low-balance alerts). Endpoint 1 is an anvil
 * loaded with this chain's state that then moves to another chain id, where the relayer has paid a wallet (its
 * Sponsored and WalletSponsored events), another wallet's `receive` reverts, and the relayer holds 1 wei; endpoint 2
 * serves the chain, where none of that is so.
 */
describe("replays, events and balances", () => {
  it("come from an endpoint that answered this chain's id in the same request: not from one that moved since the last check", async () => {
    foreign = await startTestChain();
    await chainRpc(foreign.rpcUrl, "anvil_loadState", [await anvilRpc<string>(fx, "anvil_dumpState")]);
    const relayer = privateKeyToAccount(fx.relayerKeys[0]!).address.toLowerCase() as Address;
    const randomWallet = (fill: string) => `0x${crypto.randomUUID().replaceAll("-", "").padEnd(40, fill)}` as Address;
    const [paid, refusing] = [randomWallet("5"), randomWallet("6")];
    const requestId = crypto.randomUUID();
    await chainRpc(foreign.rpcUrl, "anvil_setChainId", [fx.deployment.chainId + 1]);
    await chainRpc(foreign.rpcUrl, "anvil_impersonateAccount", [relayer]);
    const data = encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [paid, requestIdHash(requestId)] });
    await chainRpc(foreign.rpcUrl, "eth_sendTransaction", [{ from: relayer, to: fx.deployment.treasuryAddress, data, gas: "0x30000" }]);
    // PUSH0 PUSH0 REVERT: there, every payment to this wallet reverts (TransferFailed).
    await chainRpc(foreign.rpcUrl, "anvil_setCode", [refusing, "0x5f5ffd"]);
    await chainRpc(foreign.rpcUrl, "anvil_setBalance", [relayer, "0x1"]);
    const to = BigInt(await chainRpc<string>(foreign.rpcUrl, "eth_blockNumber"));
    // This chain has every block the other has (its head at least as high): each endpoint can answer every range.
    await anvilRpc(fx, "anvil_mine", ["0x2"]);
    const from = 0n;

    const chain = new WorkerChain({
      rpcUrl: [foreign.rpcUrl, fx.anvil.rpcUrl],
      chainId: fx.deployment.chainId,
      registryAddress: fx.deployment.registryAddress,
      treasuryAddress: fx.deployment.treasuryAddress,
    });
    // Both answered the chain's id at start-up, a while ago (longer than CHAIN_ID_FRESH_MS: no survey since).
    chain.breaker.noteChainId(0, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    chain.breaker.noteChainId(1, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);

    // Before, the first endpoint answered each: TransferFailed, the paid wallet's and request's events, 1 wei.
    const replay = await chain.explainSponsorRevert(relayer, refusing, crypto.randomUUID(), to);
    expect(replay?.errorName).toBeUndefined();
    expect(replay?.text).toMatch(/the same call succeeds against the state after block/);
    expect(chain.endpoints[0]).toMatchObject({ chainId: fx.deployment.chainId + 1, otherChain: true });
    // Asked of endpoint 1 alone too (its chain id not fresh again, as after a survey long ago): passed all the same.
    chain.breaker.noteChainId(0, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    expect((await chain.walletsSponsored(from, to))?.wallets.map((w) => w.wallet)).not.toContain(paid);
    chain.breaker.noteChainId(0, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    expect((await chain.findSponsoredEvents([requestId], { throughBlock: to }))?.has(requestId)).toBe(false);
    chain.breaker.noteChainId(0, fx.deployment.chainId, performance.now() - CHAIN_ID_FRESH_MS);
    expect((await chain.balances([relayer])).get(relayer)).toBeGreaterThan(1n);
    expect(chain.endpoints[0]).toMatchObject({ otherChain: true });
  });
});
