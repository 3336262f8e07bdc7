import { BaseError, ContractFunctionRevertedError, type Address } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { registryAbi, registryBytecode } from "@/contracts/generated/registry";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { requestIdHash } from "@/lib/chain/ids";
import { readAreSponsored, readIsSponsored } from "@/lib/chain/registry";
import { describeRevert, readAccountBalances } from "@/lib/chain/treasury";
import { addressOfKey } from "./deploy-lib";
import { freshWallet, newRequestId, OWNER, RELAYER, setUpTreasuryChain, STRANGER } from "@/test/treasury-fixture";

/** The registry (one mark per wallet, written only by its treasury) and the reads health and the dashboard make. */

const t = setUpTreasuryChain();
const { sponsor } = t;

describe("registry", () => {
  it("only the treasury can mark a wallet: anyone else reverts with NotTreasury(caller)", async () => {
    try {
      await t.clients.simulateContract({
        account: privateKeyToAccount(OWNER),
        address: t.shared.registryAddress,
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
    expect((await t.clients.readContract({ address: t.shared.registryAddress, abi: registryAbi, functionName: "treasury" })).toLowerCase()).toBe(
      t.shared.treasuryAddress,
    );
  });

  it("a standalone registry marks a wallet once for the writer it was deployed with", async () => {
    const writer = t.clients.walletClient(STRANGER);
    const hash = await writer.deployContract({ abi: registryAbi, bytecode: registryBytecode, args: [writer.account.address] });
    const registry = (await t.clients.waitForTransactionReceipt({ hash })).contractAddress!;
    const wallet = freshWallet();
    await t.clients.waitForTransactionReceipt({
      hash: await writer.writeContract({ address: registry, abi: registryAbi, functionName: "markSponsored", args: [wallet] }),
    });
    expect(await readIsSponsored(t.clients, registry, wallet)).toBe(true);
    try {
      await t.clients.simulateContract({ account: writer.account, address: registry, abi: registryAbi, functionName: "markSponsored", args: [wallet] });
      expect.unreachable("second markSponsored did not revert");
    } catch (error) {
      const revert = (error as BaseError).walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError;
      expect(revert.data?.errorName).toBe("AlreadySponsored");
    }
  });

  it("readAreSponsored answers many wallets at once, keyed by lowercase address, over several chunks", async () => {
    const sponsored = [freshWallet(), freshWallet()];
    for (const wallet of sponsored) await sponsor(t.shared.treasuryAddress, wallet);
    const others = Array.from({ length: 1_500 }, freshWallet);
    const answer = await readAreSponsored(t.clients, t.shared.registryAddress, [
      ...others,
      ...sponsored.map((w) => w.toUpperCase().replace("0X", "0x") as Address),
    ]);
    expect(answer.size).toBe(1_502);
    for (const wallet of sponsored) expect(answer.get(wallet.toLowerCase())).toBe(true);
    expect(others.every((w) => answer.get(w.toLowerCase()) === false)).toBe(true);
    expect(await readAreSponsored(t.clients, t.shared.registryAddress, [])).toEqual(new Map());
  });
});

describe("reads for health and the dashboard", () => {
  it("readAccountBalances returns every relayer's balance keyed by lowercase address", async () => {
    const empty = freshWallet();
    const balances = await readAccountBalances(t.clients, [privateKeyToAccount(RELAYER).address, empty]);
    expect(balances.get(addressOfKey(RELAYER))).toBeGreaterThan(0n);
    expect(balances.get(empty.toLowerCase())).toBe(0n);
  });

  it("describeRevert names the custom error behind a failed call", async () => {
    const error = await t.clients
      .simulateContract({
        account: privateKeyToAccount(STRANGER),
        address: t.shared.treasuryAddress,
        abi: treasuryAbi,
        functionName: "sponsor",
        args: [freshWallet(), requestIdHash(newRequestId())],
      })
      .catch((e: unknown) => e);
    expect(describeRevert(error)?.errorName).toBe("NotRelayer");
    expect(describeRevert(new Error("x"))?.errorName).toBeUndefined();
  });
});
