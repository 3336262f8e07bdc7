import { parseEther, toFunctionSelector, type Address } from "viem";
import { describe, expect, it } from "vitest";
import { requestIdHash } from "@/lib/chain/ids";
import { readIsSponsored } from "@/lib/chain/registry";
import { parseSponsoredEvents } from "@/lib/chain/treasury";
import { compileTestContract } from "./test-helpers";
import { AMOUNT, freshWallet, newRequestId, OWNER, RELAYER, setUpTreasuryChain, STRANGER } from "@/test/treasury-fixture";

/** The treasury against recipients that call back into it from receive(): paid once, or nothing at all. */

const t = setUpTreasuryChain();
const { deploy, sendTreasury, sponsor, revertOf } = t;

describe("reentrancy", () => {
  const attacker = compileTestContract("ReentrantRecipient.sol", "ReentrantRecipient");

  async function deployAttacker(treasury: Address): Promise<Address> {
    const wallet = t.clients.walletClient(STRANGER);
    const hash = await wallet.deployContract({ abi: attacker.abi, bytecode: attacker.bytecode, args: [treasury] });
    return (await t.clients.waitForTransactionReceipt({ hash })).contractAddress!;
  }

  const REENTRANCY = toFunctionSelector("Reentrancy()");
  const read = (address: Address, functionName: string) => t.clients.readContract({ address, abi: attacker.abi, functionName });

  it("a recipient re-entering sponsor from receive() is paid once and the treasury loses exactly the amount", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    const before = await t.clients.getBalance({ address: own.treasuryAddress });

    const receipt = await sponsor(own.treasuryAddress, evil);
    expect(receipt.status).toBe("success");
    expect(await read(evil, "payments")).toBe(1n);
    expect(await read(evil, "reentryAttempts")).toBe(1n);
    expect(await read(evil, "reentrySucceeded")).toBe(false);
    expect(((await read(evil, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);
    // The wallet was already marked when the payment arrived (effects before interaction).
    expect(await read(evil, "markedBeforePayment")).toBe(true);
    expect(await t.clients.getBalance({ address: evil })).toBe(AMOUNT);
    expect(await t.clients.getBalance({ address: own.treasuryAddress })).toBe(before - AMOUNT);
    expect(parseSponsoredEvents(receipt.logs, own.treasuryAddress)).toHaveLength(1);
  });

  it("a recipient that is itself an authorised relayer cannot re-enter either (Reentrancy), for itself or another wallet", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    await sendTreasury(OWNER, own.treasuryAddress, "addRelayer", [evil]);
    const victim = freshWallet();
    const before = await t.clients.getBalance({ address: own.treasuryAddress });

    // Re-entry for itself.
    let hash = await t.clients
      .walletClient(STRANGER)
      .writeContract({ address: evil, abi: attacker.abi, functionName: "sponsorSelf", args: [requestIdHash(newRequestId())], gas: 500_000n });
    expect((await t.clients.waitForTransactionReceipt({ hash })).status).toBe("success");
    expect(await read(evil, "payments")).toBe(1n);
    expect(await read(evil, "reentrySucceeded")).toBe(false);
    expect(((await read(evil, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);

    // A second sponsorship of itself, from outside, is refused for good.
    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [evil, requestIdHash(newRequestId())])).name).toBe("AlreadySponsored");

    // Re-entry to pay another wallet inside the same call is refused too.
    const evil2 = await deployAttacker(own.treasuryAddress);
    await sendTreasury(OWNER, own.treasuryAddress, "addRelayer", [evil2]);
    hash = await t.clients.walletClient(STRANGER).writeContract({ address: evil2, abi: attacker.abi, functionName: "configure", args: [victim, false] });
    await t.clients.waitForTransactionReceipt({ hash });
    expect((await sponsor(own.treasuryAddress, evil2)).status).toBe("success");
    expect(await read(evil2, "payments")).toBe(1n);
    expect(await read(evil2, "reentrySucceeded")).toBe(false);
    expect(((await read(evil2, "reentryRevertData")) as string).slice(0, 10)).toBe(REENTRANCY);
    expect(await t.clients.getBalance({ address: victim })).toBe(0n);
    expect(await readIsSponsored(t.clients, own.registryAddress, victim)).toBe(false);
    expect(await t.clients.getBalance({ address: own.treasuryAddress })).toBe(before - 2n * AMOUNT);
  });

  it("a recipient whose receive() fails makes the whole sponsorship revert: nothing paid, nothing marked", async () => {
    const own = await deploy({ fundWei: parseEther("10") });
    const evil = await deployAttacker(own.treasuryAddress);
    const hash = await t.clients.walletClient(STRANGER).writeContract({ address: evil, abi: attacker.abi, functionName: "configure", args: [evil, true] });
    await t.clients.waitForTransactionReceipt({ hash });
    const before = await t.clients.getBalance({ address: own.treasuryAddress });

    expect((await revertOf(RELAYER, own.treasuryAddress, "sponsor", [evil, requestIdHash(newRequestId())])).name).toBe("TransferFailed");
    expect((await sponsor(own.treasuryAddress, evil)).status).toBe("reverted");
    expect(await t.clients.getBalance({ address: evil })).toBe(0n);
    expect(await t.clients.getBalance({ address: own.treasuryAddress })).toBe(before);
    expect(await readIsSponsored(t.clients, own.registryAddress, evil)).toBe(false);
  });
});
