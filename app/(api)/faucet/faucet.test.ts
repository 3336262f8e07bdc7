import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { waitFor } from "@/bench/util";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import type { Anvil } from "@/contracts/anvil";
import { relayTransactions, sponsorshipRequests, wallets } from "@/db/schema";
import { createChainClients } from "@/lib/chain/clients";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { FAUCET_RETRY_SECONDS, FAUCET_SNAPSHOT_MS, faucetStatus } from "@/lib/faucet-status";
import { pauseSponsorships, resumeSponsorships } from "@/lib/admin/controls";
import type { AdminSession } from "@/db/schema";
import { callApi, expectProblem, reconfigure, setupApiTestContext } from "@/test/api-client";
import { faucetStatusResponse, type FaucetStatusResponse } from "@/lib/sponsorship/schemas";
import { chainRpc, startTestChain } from "@/test/chain";
import { freePort } from "@/test/ports";

/** GET /faucet (decisions.md, "Public faucet status") over the route handlers, a real database and a real anvil. */

const ctx = setupApiTestContext();
const AMOUNT = 10n ** 16n;
let chain: Anvil;
let registry: `0x${string}`;
const treasuries = {} as Record<"operating" | "low" | "empty" | "paused", `0x${string}`>;

beforeAll(async () => {
  chain = await startTestChain();
  const common = { rpcUrl: chain.rpcUrl, deployerKey: LOCAL_DEPLOYER_KEY, relayers: [addressOfKey(LOCAL_RELAYER_KEYS[0]!)], sponsorAmountWei: AMOUNT };
  const operating = await deployContracts({ ...common, fundWei: AMOUNT * 100n });
  registry = operating.registryAddress;
  treasuries.operating = operating.treasuryAddress;
  treasuries.low = (await deployContracts({ ...common, fundWei: AMOUNT * 99n })).treasuryAddress;
  treasuries.empty = (await deployContracts({ ...common, fundWei: AMOUNT - 1n })).treasuryAddress;
  treasuries.paused = (await deployContracts({ ...common, fundWei: AMOUNT * 1000n })).treasuryAddress;
  const clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: 31337 });
  const hash = await clients.walletClient(LOCAL_DEPLOYER_KEY).writeContract({ address: treasuries.paused, abi: treasuryAbi, functionName: "pause" });
  await clients.waitForTransactionReceipt({ hash });
}, 120_000);
afterAll(async () => chain?.stop());

const onChain = (treasury: `0x${string}`, env: Record<string, string> = {}) =>
  reconfigure(ctx, { RPC_URL: chain.rpcUrl, REGISTRY_ADDRESS: registry, TREASURY_ADDRESS: treasury, SPONSOR_AMOUNT_WEI: String(AMOUNT), ...env });

async function getFaucet(headers: Record<string, string> = {}): Promise<FaucetStatusResponse> {
  const answer = await callApi({ path: "/faucet", headers });
  expect(answer.status, answer.text).toBe(200);
  expect(answer.headers.get("content-type")).toBe("application/json");
  return faucetStatusResponse.parse(answer.json);
}

const hex = (bytes: number) => `0x${randomBytes(bytes).toString("hex")}`;

/** A request completed `seconds` after it was asked for, completed `agoMs` before now (the worker's path through the state machine). */
async function completed(seconds: number, agoMs: number) {
  const completedAt = new Date(Date.now() - agoMs);
  const requestedAt = new Date(completedAt.getTime() - seconds * 1000);
  const [wallet] = await ctx.t.db
    .insert(wallets)
    .values({ walletAddress: hex(20) })
    .returning();
  const [request] = await ctx.t.db
    .insert(sponsorshipRequests)
    .values({ walletId: wallet!.id, walletAddress: wallet!.walletAddress, ipAddress: "127.0.0.1", requestedAt })
    .returning();
  const id = request!.id;
  const move = (set: Partial<typeof sponsorshipRequests.$inferInsert>) =>
    ctx.t.db
      .update(sponsorshipRequests)
      .set({ statusActor: "worker:test", ...set })
      .where(eq(sponsorshipRequests.id, id));
  await move({ status: "approved", approvedAt: requestedAt, eligibilityReason: "eligible", statusReason: "approved" });
  await ctx.t.db.insert(relayTransactions).values({
    sponsorshipRequestId: id,
    relayAttempt: 1,
    status: "submitted",
    transactionHash: hex(32),
    relayerAddress: hex(20),
    nonce: 0,
    submittedAt: requestedAt,
  });
  await move({ status: "relayed", relayedAt: requestedAt, statusReason: "relayed" });
  await move({ status: "completed", completedAt, statusReason: "completed" });
}

describe("GET /faucet", () => {
  it("says what the faucet gives and on which network, operating while the treasury holds TREASURY_LOW_SPONSORSHIPS or more", async () => {
    onChain(treasuries.operating, { EXPLORER_URL: "https://explorer.example/" });
    expect(await getFaucet()).toEqual({
      chainId: 31337,
      networkName: "Local development chain",
      nativeSymbol: "ETH",
      amountWei: AMOUNT.toString(),
      explorerUrl: "https://explorer.example",
      state: "operating",
      retryAfterSeconds: null,
      medianSecondsToComplete: null,
    });
  });

  it("names the network NETWORK_NAME when it is set, and explorerUrl is null without EXPLORER_URL", async () => {
    onChain(treasuries.operating, { NETWORK_NAME: "Example testnet" });
    expect(await getFaucet()).toMatchObject({ networkName: "Example testnet", explorerUrl: null });
  });

  it("is low_funds (still serving) below TREASURY_LOW_SPONSORSHIPS sponsorships, and operating when the threshold is lower", async () => {
    onChain(treasuries.low);
    // Not `operating`, so it says when to look again (decisions.md), although it still serves.
    expect(await getFaucet()).toMatchObject({ state: "low_funds", retryAfterSeconds: FAUCET_RETRY_SECONDS });
    onChain(treasuries.low, { TREASURY_LOW_SPONSORSHIPS: "10" });
    expect(await getFaucet()).toMatchObject({ state: "operating", retryAfterSeconds: null });
  });

  it("says what the treasury pays, and counts its funds in that amount, when this process's SPONSOR_AMOUNT_WEI differs", async () => {
    // The owner changed the amount on-chain since the deployment (here: the process thinks 100x more). Before:
    // amountWei was the process's figure and the treasury of 100 sponsorships was called empty.
    onChain(treasuries.operating, { SPONSOR_AMOUNT_WEI: String(AMOUNT * 100n) });
    expect(await getFaucet()).toMatchObject({ amountWei: String(AMOUNT), state: "operating" });
  });

  it("is empty with a retry time while the treasury holds less than one sponsorship", async () => {
    onChain(treasuries.empty);
    expect(await getFaucet()).toMatchObject({ state: "empty", retryAfterSeconds: FAUCET_RETRY_SECONDS });
  });

  it("is paused while the treasury is paused on-chain", async () => {
    onChain(treasuries.paused);
    expect(await getFaucet()).toMatchObject({ state: "paused", retryAfterSeconds: FAUCET_RETRY_SECONDS });
  });

  it("is paused with Retry-After's 60 s while an administrator has paused sponsorships, whatever the chain says", async () => {
    onChain(treasuries.operating);
    const session = { id: "00000000-0000-4000-8000-00000000fa01" } as AdminSession;
    await pauseSponsorships(ctx.t.db, { session, ipAddress: null }, { reason: "test" });
    try {
      expect(await getFaucet()).toMatchObject({ state: "paused", retryAfterSeconds: 60 });
    } finally {
      await resumeSponsorships(ctx.t.db, { session, ipAddress: null });
    }
  });

  it("is budget_exhausted, with the seconds until the window has room, once the budget is spent", async () => {
    const config = onChain(treasuries.operating, { SPONSOR_BUDGET_PER_HOUR: "1" });
    const walletAddress = hex(20);
    expect((await callApi({ path: "/wallets/register", body: { walletAddress }, ip: "192.0.2.61" })).status).toBe(201);
    const created = await callApi({ path: "/sponsorship/request", body: { walletAddress }, ip: "192.0.2.61" });
    expect(created.status, created.text).toBe(201);
    const status = await getFaucet();
    expect(status.state).toBe("budget_exhausted");
    expect(status.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(status.retryAfterSeconds).toBeLessThanOrEqual(3660);
    // The status and the refusal agree.
    const refused = await callApi({ path: "/sponsorship/request", body: { walletAddress: hex(20) }, ip: "192.0.2.62" });
    expectProblem(refused, 429, "budget_exhausted");
    // The wait is the database's: this server's wall clock an hour behind does not add the hour (it did).
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      const later = await faucetStatus({ db: ctx.t.db, config }, performance.now() + 100 * FAUCET_SNAPSHOT_MS);
      expect(later.state).toBe("budget_exhausted");
      expect(later.retryAfterSeconds).toBeLessThanOrEqual(3660);
      // And the refusal's Retry-After, which the same subtraction made about 7,200 s.
      const again = await callApi({ path: "/sponsorship/request", body: { walletAddress: hex(20) }, ip: "192.0.2.63" });
      expectProblem(again, 429, "budget_exhausted");
      expect(Number(again.headers.get("retry-after"))).toBeLessThanOrEqual(3660);
    } finally {
      vi.useRealTimers();
    }
  });

  it("is chain_unreachable while the chain does not answer, or none is configured, and keeps the configured chain id", async () => {
    reconfigure(ctx, {
      RPC_URL: `http://127.0.0.1:${await freePort()}`,
      REGISTRY_ADDRESS: registry,
      TREASURY_ADDRESS: treasuries.operating,
      CHAIN_ID: "11155111",
    });
    expect(await getFaucet()).toMatchObject({
      state: "chain_unreachable",
      retryAfterSeconds: FAUCET_RETRY_SECONDS,
      chainId: 11155111,
      networkName: "Sepolia",
      nativeSymbol: "ETH",
    });
    reconfigure(ctx, {});
    expect(await getFaucet()).toMatchObject({ state: "chain_unreachable", chainId: 31337 });
  });

  it("names no network while a remote chain has never answered and CHAIN_ID is unset: 503 unavailable, not the local chain's", async () => {
    // A name that resolves nowhere (RFC 6761 .invalid): never reached, and not loopback.
    reconfigure(ctx, {
      RPC_URL: "http://rpc.faucet-test.invalid",
      REGISTRY_ADDRESS: registry,
      TREASURY_ADDRESS: treasuries.operating,
      ADMIN_TOKEN: "pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA",
    });
    const answer = await callApi({ path: "/faucet" });
    expectProblem(answer, 503, "unavailable");
    expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(answer.text).not.toContain("31337");
  });

  it("is operating while one of several RPC endpoints does not answer (the others serve), with the chain's own id", async () => {
    onChain(treasuries.operating, { RPC_URL: `http://127.0.0.1:${await freePort()},${chain.rpcUrl}`, CHAIN_ID: "31337" });
    expect(await getFaucet()).toMatchObject({ state: "operating", retryAfterSeconds: null, chainId: 31337 });
    onChain(treasuries.paused, { RPC_URL: `${chain.rpcUrl},http://127.0.0.1:${await freePort()}` });
    expect(await getFaucet()).toMatchObject({ state: "paused", retryAfterSeconds: FAUCET_RETRY_SECONDS });
  });

  it("reports the median seconds from requested to completed over the requests completed in the last hour", async () => {
    onChain(treasuries.operating);
    await completed(10, 60_000);
    await completed(20, 120_000);
    await completed(40, 30 * 60_000);
    await completed(1000, 2 * 3_600_000); // completed over an hour ago: not counted
    expect((await getFaucet()).medianSecondsToComplete).toBe(20);
  });

  it("is served from a snapshot at most FAUCET_SNAPSHOT_MS old, shared by every caller in between", async () => {
    const config = onChain(treasuries.operating);
    const deps = { db: ctx.t.db, config };
    const c0 = performance.now() + 10 * FAUCET_SNAPSHOT_MS; // after any snapshot earlier tests left
    const first = await faucetStatus(deps, c0);
    await completed(1, 1_000);
    await completed(1, 1_000);
    await completed(1, 1_000);
    await completed(1, 1_000);
    // Within the snapshot's second the database is not asked again: the new completions do not show yet.
    expect(await faucetStatus(deps, c0 + FAUCET_SNAPSHOT_MS - 1)).toBe(first);
    const later = await faucetStatus(deps, c0 + FAUCET_SNAPSHOT_MS);
    expect(later).not.toBe(first);
    expect(later.medianSecondsToComplete).not.toBe(first.medianSecondsToComplete);
  });

  it("takes a new snapshot once the last has aged, also after the wall clock stepped back", async () => {
    onChain(treasuries.operating);
    expect((await getFaucet()).state).toBe("operating");
    // Date steps back an hour (NTP, a restored VM); timers and performance.now() do not, as with a real step.
    // Before, the snapshot's age was taken on the wall clock: negative, so the page said "operating" for the hour
    // while the treasury was empty.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true, now: Date.now() - 3_600_000 });
    try {
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [treasuries.operating, "0x0"]);
      const state = await waitFor("GET /faucet to say empty", async () => ((await getFaucet()).state === "empty" ? "empty" : undefined), {
        timeoutMs: 10_000,
      });
      expect(state).toBe("empty");
    } finally {
      vi.useRealTimers();
      await chainRpc(chain.rpcUrl, "anvil_setBalance", [treasuries.operating, toHex(AMOUNT * 100n)]);
    }
  });

  it("answers CORS like the other API routes: an allowed origin is echoed, a foreign one is 403 origin_not_allowed", async () => {
    onChain(treasuries.operating, { CORS_ORIGINS: "https://wallet.example" });
    const allowed = await callApi({ path: "/faucet", headers: { origin: "https://wallet.example" } });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://wallet.example");
    expectProblem(await callApi({ path: "/faucet", headers: { origin: "https://evil.example" } }), 403, "origin_not_allowed");
    expectProblem(await callApi({ method: "POST", path: "/faucet", body: {} }), 405, "method_not_allowed");
  });
});
