import { randomBytes, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { encodeFunctionData, getAddress, keccak256, type Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { treasuryAbi } from "@/contracts/generated/treasury";
import { requestIdHash } from "@/lib/chain/ids";
import { encodeSponsorCall, FILL_GAS_LIMIT, SPONSOR_GAS_LIMIT, signFillTransaction, signSponsorTransaction } from "./transactions";

/**
 * Session 6 (issue 15) cut the work per relay attempt (bench/worker-sign.ts); what is signed, stored and broadcast
 * must not change by a single byte: each result here is compared with viem's own encodeFunctionData and
 * signTransaction for the same inputs.
 */

const randomAddress = (): Address => `0x${randomBytes(20).toString("hex")}`;
/** Addresses with leading zero bytes, checksummed (mixed case) and all-zero, besides random ones. */
const addresses: Address[] = [
  "0x0000000000000000000000000000000000000000",
  "0x0000000000000000000000000000000000000001",
  "0x00000000000000000000000000000000000000ff",
  getAddress("0x00000000219ab540356cbb839cbe05303d7705fa"),
  getAddress("0xffffffffffffffffffffffffffffffffffffffff"),
  ...Array.from({ length: 40 }, randomAddress),
  ...Array.from({ length: 20 }, () => getAddress(randomAddress())),
];

describe("the sponsor call's calldata", () => {
  it("is byte for byte what encodeFunctionData gives, for any wallet address and request id", () => {
    for (const wallet of addresses) {
      const id = randomUUID();
      expect(encodeSponsorCall(wallet, id)).toBe(encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [wallet, requestIdHash(id)] }));
    }
  });

  it("refuses what is not an address, as encodeFunctionData does", () => {
    const id = randomUUID();
    for (const bad of ["0x1234", "0xzz00000000000000000000000000000000000000", "0x5FbDB2315678afecb367f032d93F642f64180aA3"] as Address[]) {
      expect(() => encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [bad, requestIdHash(id)] })).toThrow(/Address/);
      expect(() => encodeSponsorCall(bad, id)).toThrow(/Address/);
    }
  });
});

describe("a signed attempt", () => {
  it("has the raw bytes and hash that viem's signTransaction gives for the same transaction", async () => {
    for (let i = 0; i < 12; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const wallet = addresses[i * 5]!;
      const requestId = randomUUID();
      const fees = { maxFeePerGas: BigInt(1 + i) * 1_234_567_891n, maxPriorityFeePerGas: BigInt(i) * 1_000_000_007n };
      const treasury = getAddress(randomAddress());
      const nonce = i * 1_000 + i;
      const ours = await signSponsorTransaction(account, { chainId: 31337 + i, treasury, nonce, fees, wallet, requestId });
      const raw = await account.signTransaction({
        type: "eip1559",
        chainId: 31337 + i,
        nonce,
        to: treasury,
        value: 0n,
        gas: SPONSOR_GAS_LIMIT,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        data: encodeFunctionData({ abi: treasuryAbi, functionName: "sponsor", args: [wallet, requestIdHash(requestId)] }),
      });
      expect(ours).toEqual({ raw, hash: keccak256(raw) });
    }
  });

  it("of a nonce fill has the raw bytes and hash that viem's signTransaction gives", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const fees = { maxFeePerGas: 3_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n };
    const ours = await signFillTransaction(account, { chainId: 31337, nonce: 7, fees });
    const raw = await account.signTransaction({ type: "eip1559", chainId: 31337, nonce: 7, to: account.address, value: 0n, gas: FILL_GAS_LIMIT, ...fees });
    expect(ours).toEqual({ raw, hash: keccak256(raw) });
  });
});
