import { BaseError, ContractFunctionRevertedError, parseEther, keccak256, parseEventLogs, toFunctionSelector, type Abi, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registryAbi, registryBytecode } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { createChainClients, type ChainClients } from "@/lib/chain/clients";
import { requestIdHash, uuidToBytes16 } from "@/lib/chain/ids";
import { readAreSponsored, readIsSponsored } from "@/lib/chain/registry";
import { describeRevert, parseSponsoredEvents, readAccountBalances, readTreasuryState } from "@/lib/chain/treasury";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { startTestChain } from "@/test/chain";
import type { Anvil } from "./anvil";
import { addressOfKey, deployContracts, type DeployResult } from "./deploy-lib";
import { compileTestContract } from "./test-helpers";

type Key = `0x${string}`;

const AMOUNT = parseEther("0.01");
const OWNER = LOCAL_DEPLOYER_KEY;
const RELAYER = LOCAL_RELAYER_KEYS[0]!;
const RELAYER_2 = LOCAL_RELAYER_KEYS[1]!;
/** A funded account that is neither owner nor relayer. */
const STRANGER = LOCAL_RELAYER_KEYS[3]!;

let chain: Anvil;
let clients: ChainClients;
/** The shared deployment; tests that pause, drain or change it deploy their own. */
let shared: DeployResult;

const freshWallet = (): Address => privateKeyToAccount(generatePrivateKey()).address;
const newRequestId = () => crypto.randomUUID();

async function deploy(options: { fundWei?: bigint; amount?: bigint; relayers?: Address[] } = {}): Promise<DeployResult> {
  return deployContracts({
    rpcUrl: chain.rpcUrl,
    deployerKey: OWNER,
    relayers: options.relayers ?? [addressOfKey(RELAYER), addressOfKey(RELAYER_2)],
    sponsorAmountWei: options.amount ?? AMOUNT,
    fundWei: options.fundWei ?? parseEther("10"),
    pollingIntervalMs: 50,
  });
}

/** Sends a treasury transaction as `key` with a fixed gas limit (no estimation, so a reverting call is mined). */
async function sendTreasury(key: Key, treasury: Address, functionName: string, args: readonly unknown[]) {
  const hash = await clients.walletClient(key).writeContract({
    address: treasury,
    abi: treasuryAbi as Abi,
    functionName,
    args,
    gas: 300_000n,
  });
  return clients.waitForTransactionReceipt({ hash });
}

async function sponsor(treasury: Address, wallet: Address, requestId = newRequestId(), key: Key = RELAYER) {
  return sendTreasury(key, treasury, "sponsor", [wallet, requestIdHash(requestId)]);
}

/** The custom error (name and arguments) a treasury call from `key` reverts with, found by simulating it. */
async function revertOf(key: Key, treasury: Address, functionName: string, args: readonly unknown[]) {
  try {
    await clients.simulateContract({ account: privateKeyToAccount(key), address: treasury, abi: treasuryAbi as Abi, functionName, args });
  } catch (error) {
    const revert = error instanceof BaseError ? error.walk((e) => e instanceof ContractFunctionRevertedError) : undefined;
    if (revert instanceof ContractFunctionRevertedError) return { name: revert.data?.errorName, args: revert.data?.args ?? [] };
    throw error;
  }
  throw new Error(`${functionName} did not revert`);
}

beforeAll(async () => {
  chain = await startTestChain();
  clients = createChainClients({ rpcUrl: chain.rpcUrl, chainId: 31337, pollingIntervalMs: 50 });
  shared = await deploy({ fundWei: parseEther("100") });
});

afterAll(async () => {
  await chain?.stop();
});

describe("sponsor", () => {
  it("pays the configured amount to the wallet and marks it in the registry", async () => {
    const wallet = freshWallet();
    const before = await clients.getBalance({ address: shared.treasuryAddress });
    const receipt = await sponsor(shared.treasuryAddress, wallet);
    expect(receipt.status).toBe("success");
    expect(await clients.getBalance({ address: wallet })).toBe(AMOUNT);
    expect(await clients.getBalance({ address: shared.treasuryAddress })).toBe(before - AMOUNT);
    expect(await readIsSponsored(clients, shared.registryAddress, wallet)).toBe(true);
  });

  it("emits Sponsored with the wallet, the hash of the request id (never the id), the amount and the relayer", async () => {
    const wallet = freshWallet();
    const requestId = newRequestId();
    const receipt = await sponsor(shared.treasuryAddress, wallet, requestId, RELAYER_2);
    const events = parseSponsoredEvents(receipt.logs, shared.treasuryAddress);
    expect(events).toEqual([
      {
        wallet: wallet.toLowerCase(),
        requestIdHash: requestIdHash(requestId),
        amount: AMOUNT,
        relayer: addressOfKey(RELAYER_2),
        transactionHash: receipt.transactionHash,
        logIndex: expect.any(Number),
      },
    ]);
    // The raw topic is keccak256 of the UUID's 16 bytes: logs can be filtered by the hash of a known id, and
    // nothing public (calldata, topics, data) holds the id itself (decisions.md, "Privacy").
    const raw = parseEventLogs({ abi: treasuryAbi, eventName: "Sponsored", logs: receipt.logs });
    expect(raw[0]?.args.requestIdHash).toBe(keccak256(uuidToBytes16(requestId)));
    const transaction = await clients.getTransaction({ hash: receipt.transactionHash });
    const idHex = requestId.replaceAll("-", "");
    for (const published of [transaction.input, ...receipt.logs.flatMap((l) => [...l.topics, l.data])]) {
      expect(published.toLowerCase()).not.toContain(idHex);
    }
    const marked = parseEventLogs({ abi: registryAbi, eventName: "WalletSponsored", logs: receipt.logs });
    expect(marked.map((l) => l.args.wallet)).toEqual([wallet]);
  });

  it("only an authorised relayer can sponsor: others revert with NotRelayer(caller)", async () => {
    const wallet = freshWallet();
    expect(await revertOf(STRANGER, shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "NotRelayer",
      args: [privateKeyToAccount(STRANGER).address],
    });
    // Not even the owner.
    expect((await revertOf(OWNER, shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).name).toBe("NotRelayer");
    const receipt = await sponsor(shared.treasuryAddress, wallet, newRequestId(), STRANGER);
    expect(receipt.status).toBe("reverted");
    expect(await clients.getBalance({ address: wallet })).toBe(0n);
    expect(await readIsSponsored(clients, shared.registryAddress, wallet)).toBe(false);
  });

  it("sponsors a wallet once: the second call reverts with AlreadySponsored(wallet), whoever relays it", async () => {
    const wallet = freshWallet();
    expect((await sponsor(shared.treasuryAddress, wallet)).status).toBe("success");
    const treasuryBefore = await clients.getBalance({ address: shared.treasuryAddress });

    expect(await revertOf(RELAYER_2, shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "AlreadySponsored",
      args: [wallet],
    });
    const second = await sponsor(shared.treasuryAddress, wallet, newRequestId(), RELAYER_2);
    expect(second.status).toBe("reverted");
    expect(await clients.getBalance({ address: wallet })).toBe(AMOUNT);
    expect(await clients.getBalance({ address: shared.treasuryAddress })).toBe(treasuryBefore);
  });

  it("refuses the zero address with ZeroAddress()", async () => {
    expect(
      (await revertOf(RELAYER, shared.treasuryAddress, "sponsor", ["0x0000000000000000000000000000000000000000", requestIdHash(newRequestId())])).name,
    ).toBe("ZeroAddress");
  });

  it("a paused treasury refuses with TreasuryPaused(); unpausing resumes", async () => {
    const own = await deploy();
    expect((await sendTreasury(OWNER, own.treasuryAddress, "pause", [])).status).toBe("success");
    expect((await readTreasuryState(clients, own.treasuryAddress)).paused).toBe(true);
    const wallet = freshWallet();
    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).name).toBe("TreasuryPaused");
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("reverted");

    expect((await sendTreasury(OWNER, own.treasuryAddress, "unpause", [])).status).toBe("success");
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("success");
    expect(await clients.getBalance({ address: wallet })).toBe(AMOUNT);
  });

  it("refuses with InsufficientBalance(balance, amount) when the treasury holds less than the amount", async () => {
    const own = await deploy({ fundWei: AMOUNT / 2n });
    const wallet = freshWallet();
    expect(await revertOf(RELAYER, own.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "InsufficientBalance",
      args: [AMOUNT / 2n, AMOUNT],
    });
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("reverted");
    expect(await readIsSponsored(clients, own.registryAddress, wallet)).toBe(false);
  });

  it("a wallet that refuses the payment is not marked: TransferFailed(wallet)", async () => {
    // The registry contract has no receive(): as a recipient it rejects native tokens.
    expect(await revertOf(RELAYER, shared.treasuryAddress, "sponsor", [shared.registryAddress, requestIdHash(newRequestId())])).toEqual({
      name: "TransferFailed",
      args: [expect.stringMatching(new RegExp(shared.registryAddress, "i"))],
    });
    expect(await readIsSponsored(clients, shared.registryAddress, shared.registryAddress)).toBe(false);
  });
});

describe("owner functions", () => {
  const ownerCalls: [string, readonly unknown[]][] = [
    ["setAmount", [1n]],
    ["addRelayer", ["0x000000000000000000000000000000000000dEaD"]],
    ["removeRelayer", [privateKeyToAccount(RELAYER).address]],
    ["pause", []],
    ["unpause", []],
    ["withdraw", ["0x000000000000000000000000000000000000dEaD", 1n]],
    ["transferOwnership", ["0x000000000000000000000000000000000000dEaD"]],
  ];

  it.each(ownerCalls)("%s refuses anyone but the owner with NotOwner(caller)", async (functionName, args) => {
    for (const key of [RELAYER, STRANGER]) {
      expect(await revertOf(key, shared.treasuryAddress, functionName, args)).toEqual({ name: "NotOwner", args: [privateKeyToAccount(key).address] });
    }
    expect((await sendTreasury(STRANGER, shared.treasuryAddress, functionName, args)).status).toBe("reverted");
  });

  it("setAmount changes the amount paid and emits AmountChanged; zero is refused with InvalidAmount", async () => {
    const own = await deploy();
    const receipt = await sendTreasury(OWNER, own.treasuryAddress, "setAmount", [12345n]);
    const [event] = parseEventLogs({ abi: treasuryAbi, eventName: "AmountChanged", logs: receipt.logs });
    expect(event?.args).toEqual({ previousAmount: AMOUNT, newAmount: 12345n });
    const wallet = freshWallet();
    await sponsor(own.treasuryAddress, wallet);
    expect(await clients.getBalance({ address: wallet })).toBe(12345n);
    expect((await revertOf(OWNER, own.treasuryAddress, "setAmount", [0n])).name).toBe("InvalidAmount");
  });

  it("addRelayer authorises and removeRelayer revokes, each with its event", async () => {
    const own = await deploy({ relayers: [addressOfKey(RELAYER)] });
    const stranger = privateKeyToAccount(STRANGER).address;
    const added = await sendTreasury(OWNER, own.treasuryAddress, "addRelayer", [stranger]);
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "RelayerAdded", logs: added.logs })[0]?.args.relayer).toBe(stranger);
    expect((await sponsor(own.treasuryAddress, freshWallet(), newRequestId(), STRANGER)).status).toBe("success");

    const removed = await sendTreasury(OWNER, own.treasuryAddress, "removeRelayer", [stranger]);
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "RelayerRemoved", logs: removed.logs })[0]?.args.relayer).toBe(stranger);
    expect((await revertOf(STRANGER, own.treasuryAddress, "sponsor", [freshWallet(), requestIdHash(newRequestId())])).name).toBe("NotRelayer");
  });

  it("withdraw sends the given amount to the given address and emits Withdrawn; more than the balance is refused", async () => {
    const own = await deploy({ fundWei: parseEther("3") });
    const to = freshWallet();
    const receipt = await sendTreasury(OWNER, own.treasuryAddress, "withdraw", [to, parseEther("1")]);
    expect(receipt.status).toBe("success");
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "Withdrawn", logs: receipt.logs })[0]?.args).toEqual({ to, amount: parseEther("1") });
    expect(await clients.getBalance({ address: to })).toBe(parseEther("1"));
    expect(await clients.getBalance({ address: own.treasuryAddress })).toBe(parseEther("2"));
    expect(await revertOf(OWNER, own.treasuryAddress, "withdraw", [to, parseEther("5")])).toEqual({
      name: "InsufficientBalance",
      args: [parseEther("2"), parseEther("5")],
    });
  });

  it("transferOwnership hands the owner functions to the new owner only", async () => {
    const own = await deploy();
    const newOwner = privateKeyToAccount(STRANGER).address;
    const receipt = await sendTreasury(OWNER, own.treasuryAddress, "transferOwnership", [newOwner]);
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "OwnershipTransferred", logs: receipt.logs })[0]?.args).toEqual({
      previousOwner: privateKeyToAccount(OWNER).address,
      newOwner,
    });
    expect((await revertOf(OWNER, own.treasuryAddress, "pause", [])).name).toBe("NotOwner");
    expect((await sendTreasury(STRANGER, own.treasuryAddress, "pause", [])).status).toBe("success");
  });

  it("funding by a plain transfer emits Funded(from, amount)", async () => {
    const own = await deploy({ fundWei: 0n });
    const hash = await clients.walletClient(STRANGER).sendTransaction({ to: own.treasuryAddress, value: parseEther("1") });
    const receipt = await clients.waitForTransactionReceipt({ hash });
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "Funded", logs: receipt.logs })[0]?.args).toEqual({
      from: privateKeyToAccount(STRANGER).address,
      amount: parseEther("1"),
    });
    expect(await readTreasuryState(clients, own.treasuryAddress)).toEqual({ balance: parseEther("1"), amount: AMOUNT, paused: false });
  });
});

describe("registry", () => {
  it("only the treasury can mark a wallet: anyone else reverts with NotTreasury(caller)", async () => {
    try {
      await clients.simulateContract({
        account: privateKeyToAccount(OWNER),
        address: shared.registryAddress,
        abi: registryAbi,
        functionName: "markSponsored",
        args: [freshWallet()],
      });
      expect.unreachable("markSponsored did not revert");
    } catch (error) {
      const revert = (error as BaseError).walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError;
      expect(revert.data?.errorName).toBe("NotTreasury");
      expect(revert.data?.args).toEqual([privateKeyToAccount(OWNER).address]);
    }
  });

  it("the registry's writer is fixed: it names the treasury that deployed it", async () => {
    expect((await clients.readContract({ address: shared.registryAddress, abi: registryAbi, functionName: "treasury" })).toLowerCase()).toBe(
      shared.treasuryAddress,
    );
  });

  it("a standalone registry marks a wallet once for the writer it was deployed with", async () => {
    const writer = clients.walletClient(STRANGER);
    const hash = await writer.deployContract({ abi: registryAbi, bytecode: registryBytecode, args: [writer.account.address] });
    const registry = (await clients.waitForTransactionReceipt({ hash })).contractAddress!;
    const wallet = freshWallet();
    await clients.waitForTransactionReceipt({
      hash: await writer.writeContract({ address: registry, abi: registryAbi, functionName: "markSponsored", args: [wallet] }),
    });
    expect(await readIsSponsored(clients, registry, wallet)).toBe(true);
    try {
      await clients.simulateContract({ account: writer.account, address: registry, abi: registryAbi, functionName: "markSponsored", args: [wallet] });
      expect.unreachable("second markSponsored did not revert");
    } catch (error) {
      const revert = (error as BaseError).walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError;
      expect(revert.data?.errorName).toBe("AlreadySponsored");
    }
  });

  it("readAreSponsored answers many wallets at once, keyed by lowercase address, over several chunks", async () => {
    const sponsored = [freshWallet(), freshWallet()];
    for (const wallet of sponsored) await sponsor(shared.treasuryAddress, wallet);
    const others = Array.from({ length: 1_500 }, freshWallet);
    const answer = await readAreSponsored(clients, shared.registryAddress, [
      ...others,
      ...sponsored.map((w) => w.toUpperCase().replace("0X", "0x") as Address),
    ]);
    expect(answer.size).toBe(1_502);
    for (const wallet of sponsored) expect(answer.get(wallet.toLowerCase())).toBe(true);
    expect(others.every((w) => answer.get(w.toLowerCase()) === false)).toBe(true);
    expect(await readAreSponsored(clients, shared.registryAddress, [])).toEqual(new Map());
  });
});

describe("reads for health and the dashboard", () => {
  it("readAccountBalances returns every relayer's balance keyed by lowercase address", async () => {
    const empty = freshWallet();
    const balances = await readAccountBalances(clients, [privateKeyToAccount(RELAYER).address, empty]);
    expect(balances.get(addressOfKey(RELAYER))).toBeGreaterThan(0n);
    expect(balances.get(empty.toLowerCase())).toBe(0n);
  });

  it("describeRevert names the custom error behind a failed call", async () => {
    const error = await clients
      .simulateContract({
        account: privateKeyToAccount(STRANGER),
        address: shared.treasuryAddress,
        abi: treasuryAbi,
        functionName: "sponsor",
        args: [freshWallet(), requestIdHash(newRequestId())],
      })
      .catch((e: unknown) => e);
    expect(describeRevert(error)?.errorName).toBe("NotRelayer");
    expect(describeRevert(new Error("x"))?.errorName).toBeUndefined();
  });
});

describe("reentrancy", () => {
  const attacker = compileTestContract("ReentrantRecipient.sol", "ReentrantRecipient");

  async function deployAttacker(treasury: Address): Promise<Address> {
    const wallet = clients.walletClient(STRANGER);
    const hash = await wallet.deployContract({ abi: attacker.abi, bytecode: attacker.bytecode, args: [treasury] });
    return (await clients.waitForTransactionReceipt({ hash })).contractAddress!;
  }

  const REENTRANCY = toFunctionSelector("Reentrancy()");
  const read = (address: Address, functionName: string) => clients.readContract({ address, abi: attacker.abi, functionName });

  it("a recipient re-entering sponsor from receive() is paid once and the treasury loses exactly the amount", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    const before = await clients.getBalance({ address: own.treasuryAddress });

    const receipt = await sponsor(own.treasuryAddress, evil);
    expect(receipt.status).toBe("success");
    expect(await read(evil, "payments")).toBe(1n);
    expect(await read(evil, "reentryAttempts")).toBe(1n);
    expect(await read(evil, "reentrySucceeded")).toBe(false);
    expect(((await read(evil, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);
    // The wallet was already marked when the payment arrived (effects before interaction).
    expect(await read(evil, "markedBeforePayment")).toBe(true);
    expect(await clients.getBalance({ address: evil })).toBe(AMOUNT);
    expect(await clients.getBalance({ address: own.treasuryAddress })).toBe(before - AMOUNT);
    expect(parseSponsoredEvents(receipt.logs, own.treasuryAddress)).toHaveLength(1);
  });

  it("a recipient that is itself an authorised relayer cannot re-enter either (Reentrancy), for itself or another wallet", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    await sendTreasury(OWNER, own.treasuryAddress, "addRelayer", [evil]);
    const victim = freshWallet();
    const before = await clients.getBalance({ address: own.treasuryAddress });

    // Re-entry for itself.
    let hash = await clients
      .walletClient(STRANGER)
      .writeContract({ address: evil, abi: attacker.abi, functionName: "sponsorSelf", args: [requestIdHash(newRequestId())], gas: 500_000n });
    expect((await clients.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await read(evil, "payments")).toBe(1n);
    expect(await read(evil, "reentrySucceeded")).toBe(false);
    expect(((await read(evil, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);

    // A second sponsorship of itself, from outside, is refused for good.
    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [evil, requestIdHash(newRequestId())])).name).toBe("AlreadySponsored");

    // Re-entry to pay another wallet inside the same call is refused too.
    const evil2 = await deployAttacker(own.treasuryAddress);
    await sendTreasury(OWNER, own.treasuryAddress, "addRelayer", [evil2]);
    hash = await clients.walletClient(STRANGER).writeContract({ address: evil2, abi: attacker.abi, functionName: "configure", args: [victim, false] });
    await clients.waitForTransactionReceipt({ hash });
    expect((await sponsor(own.treasuryAddress, evil2)).status).toBe("success");
    expect(await read(evil2, "payments")).toBe(1n);
    expect(await read(evil2, "reentrySucceeded")).toBe(false);
    expect(((await read(evil2, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);
    expect(await clients.getBalance({ address: victim })).toBe(0n);
    expect(await readIsSponsored(clients, own.registryAddress, victim)).toBe(false);
    expect(await clients.getBalance({ address: own.treasuryAddress })).toBe(before - 2n * AMOUNT);
  });

  it("a recipient whose receive() fails makes the whole sponsorship revert: nothing paid, nothing marked", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    const hash = await clients.walletClient(STRANGER).writeContract({ address: evil, abi: attacker.abi, functionName: "configure", args: [evil, true] });
    await clients.waitForTransactionReceipt({ hash });
    const before = await clients.getBalance({ address: own.treasuryAddress });

    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [evil, requestIdHash(newRequestId())])).name).toBe("TransferFailed");
    expect((await sponsor(own.treasuryAddress, evil)).status).toBe("reverted");
    expect(await clients.getBalance({ address: evil })).toBe(0n);
    expect(await clients.getBalance({ address: own.treasuryAddress })).toBe(before);
    expect(await readIsSponsored(clients, own.registryAddress, evil)).toBe(false);
  });
});
