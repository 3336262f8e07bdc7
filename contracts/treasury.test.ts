import { parseEther, keccak256, parseEventLogs } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { registryAbi } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { requestIdHash, uuidToBytes16 } from "@/lib/chain/ids";
import { readIsSponsored } from "@/lib/chain/registry";
import { parseSponsoredEvents, readTreasuryState } from "@/lib/chain/treasury";
import { addressOfKey } from "./deploy-lib";
import { AMOUNT, freshWallet, newRequestId, OWNER, RELAYER, RELAYER_2, setUpTreasuryChain, STRANGER } from "@/test/treasury-fixture";

/** The treasury: sponsoring (who may, whom, how often, with what event) and the owner's functions. */

const t = setUpTreasuryChain();
const { deploy, sendTreasury, sponsor, revertOf } = t;

describe("sponsor", () => {
  it("pays the configured amount to the wallet and marks it in the registry", async () => {
    const wallet = freshWallet();
    const before = await t.clients.getBalance({ address: t.shared.treasuryAddress });
    const receipt = await sponsor(t.shared.treasuryAddress, wallet);
    expect(receipt.status).toBe("success");
    expect(await t.clients.getBalance({ address: wallet })).toBe(AMOUNT);
    expect(await t.clients.getBalance({ address: t.shared.treasuryAddress })).toBe(before - AMOUNT);
    expect(await readIsSponsored(t.clients, t.shared.registryAddress, wallet)).toBe(true);
  });

  it("emits Sponsored with the wallet, the hash of the request id (never the id), the amount and the relayer", async () => {
    const wallet = freshWallet();
    const requestId = newRequestId();
    const receipt = await sponsor(t.shared.treasuryAddress, wallet, requestId, RELAYER_2);
    const events = parseSponsoredEvents(receipt.logs, t.shared.treasuryAddress);
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
    const transaction = await t.clients.getTransaction({ hash: receipt.transactionHash });
    const idHex = requestId.replaceAll("-", "");
    for (const published of [transaction.input, ...receipt.logs.flatMap((l) => [...l.topics, l.data])]) {
      expect(published.toLowerCase()).not.toContain(idHex);
    }
    const marked = parseEventLogs({ abi: registryAbi, eventName: "WalletSponsored", logs: receipt.logs });
    expect(marked.map((l) => l.args.wallet)).toEqual([wallet]);
  });

  it("only an authorised relayer can sponsor: others revert with NotRelayer(caller)", async () => {
    const wallet = freshWallet();
    expect(await revertOf(STRANGER, t.shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "NotRelayer",
      args: [privateKeyToAccount(STRANGER).address],
    });
    // Not even the owner.
    expect((await revertOf(OWNER, t.shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).name).toBe("NotRelayer");
    const receipt = await sponsor(t.shared.treasuryAddress, wallet, newRequestId(), STRANGER);
    expect(receipt.status).toBe("reverted");
    expect(await t.clients.getBalance({ address: wallet })).toBe(0n);
    expect(await readIsSponsored(t.clients, t.shared.registryAddress, wallet)).toBe(false);
  });

  it("sponsors a wallet once: the second call reverts with AlreadySponsored(wallet), whoever relays it", async () => {
    const wallet = freshWallet();
    expect((await sponsor(t.shared.treasuryAddress, wallet)).status).toBe("success");
    const treasuryBefore = await t.clients.getBalance({ address: t.shared.treasuryAddress });

    expect(await revertOf(RELAYER_2, t.shared.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "AlreadySponsored",
      args: [wallet],
    });
    const second = await sponsor(t.shared.treasuryAddress, wallet, newRequestId(), RELAYER_2);
    expect(second.status).toBe("reverted");
    expect(await t.clients.getBalance({ address: wallet })).toBe(AMOUNT);
    expect(await t.clients.getBalance({ address: t.shared.treasuryAddress })).toBe(treasuryBefore);
  });

  it("refuses the zero address with ZeroAddress()", async () => {
    expect(
      (await revertOf(RELAYER, t.shared.treasuryAddress, "sponsor", ["0x0000000000000000000000000000000000000000", requestIdHash(newRequestId())])).name,
    ).toBe("ZeroAddress");
  });

  it("a paused treasury refuses with TreasuryPaused(); unpausing resumes", async () => {
    const own = await deploy();
    expect((await sendTreasury(OWNER, own.treasuryAddress, "pause", [])).status).toBe("success");
    expect((await readTreasuryState(t.clients, own.treasuryAddress)).paused).toBe(true);
    const wallet = freshWallet();
    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).name).toBe("TreasuryPaused");
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("reverted");

    expect((await sendTreasury(OWNER, own.treasuryAddress, "unpause", [])).status).toBe("success");
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("success");
    expect(await t.clients.getBalance({ address: wallet })).toBe(AMOUNT);
  });

  it("refuses with InsufficientBalance(balance, amount) when the treasury holds less than the amount", async () => {
    const own = await deploy({ fundWei: AMOUNT / 2n });
    const wallet = freshWallet();
    expect(await revertOf(RELAYER, own.treasuryAddress, "sponsor", [wallet, requestIdHash(newRequestId())])).toEqual({
      name: "InsufficientBalance",
      args: [AMOUNT / 2n, AMOUNT],
    });
    expect((await sponsor(own.treasuryAddress, wallet)).status).toBe("reverted");
    expect(await readIsSponsored(t.clients, own.registryAddress, wallet)).toBe(false);
  });

  it("a wallet that refuses the payment is not marked: TransferFailed(wallet)", async () => {
    // The registry contract has no receive(): as a recipient it rejects native tokens.
    expect(await revertOf(RELAYER, t.shared.treasuryAddress, "sponsor", [t.shared.registryAddress, requestIdHash(newRequestId())])).toEqual({
      name: "TransferFailed",
      args: [expect.stringMatching(new RegExp(t.shared.registryAddress, "i"))],
    });
    expect(await readIsSponsored(t.clients, t.shared.registryAddress, t.shared.registryAddress)).toBe(false);
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
      expect(await revertOf(key, t.shared.treasuryAddress, functionName, args)).toEqual({ name: "NotOwner", args: [privateKeyToAccount(key).address] });
    }
    expect((await sendTreasury(STRANGER, t.shared.treasuryAddress, functionName, args)).status).toBe("reverted");
  });

  it("setAmount changes the amount paid and emits AmountChanged; zero is refused with InvalidAmount", async () => {
    const own = await deploy();
    const receipt = await sendTreasury(OWNER, own.treasuryAddress, "setAmount", [12345n]);
    const [event] = parseEventLogs({ abi: treasuryAbi, eventName: "AmountChanged", logs: receipt.logs });
    expect(event?.args).toEqual({ previousAmount: AMOUNT, newAmount: 12345n });
    const wallet = freshWallet();
    await sponsor(own.treasuryAddress, wallet);
    expect(await t.clients.getBalance({ address: wallet })).toBe(12345n);
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
    expect(await t.clients.getBalance({ address: to })).toBe(parseEther("1"));
    expect(await t.clients.getBalance({ address: own.treasuryAddress })).toBe(parseEther("2"));
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
    const hash = await t.clients.walletClient(STRANGER).sendTransaction({ to: own.treasuryAddress, value: parseEther("1") });
    const receipt = await t.clients.waitForTransactionReceipt({ hash });
    expect(parseEventLogs({ abi: treasuryAbi, eventName: "Funded", logs: receipt.logs })[0]?.args).toEqual({
      from: privateKeyToAccount(STRANGER).address,
      amount: parseEther("1"),
    });
    expect(await readTreasuryState(t.clients, own.treasuryAddress)).toEqual({ balance: parseEther("1"), amount: AMOUNT, paused: false });
  });
});
