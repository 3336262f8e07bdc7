import { describe, expect, it } from "vitest";
import type { Address, Hex } from "viem";
import type { OpenNonceTransaction } from "@/db/queries/nonce-groups";
import { oneRequestOf } from "./settle";
import type { Group } from "./state";

/** The groups whose receipts and nonce are asked in one request, within a provider's RPC_BATCH_SIZE. */

const A = "0x00000000000000000000000000000000000000aa" as Address;
const B = "0x00000000000000000000000000000000000000bb" as Address;

function group(relayer: Address, nonce: number, attempts: number): Group {
  const rows = Array.from({ length: attempts }, (_, i) => ({
    kind: "relay",
    id: `${nonce}-${i}`,
    relayerAddress: relayer,
    nonce,
    status: "submitted",
    transactionHash: `0x${"0".repeat(63)}${i}` as Hex,
  }));
  return { relayer, nonce, rows: rows as unknown as OpenNonceTransaction[] };
}

describe("oneRequestOf", () => {
  it("takes groups while their hashes and one nonce per relayer fit the batch", () => {
    const groups = [group(A, 1, 2), group(A, 2, 1), group(B, 7, 1), group(A, 3, 1)];
    // A's nonce + 2 + 1 hashes = 4; B's nonce + 1 = 6 > 5: stops there (the rest wait for a later pass).
    expect(oneRequestOf(groups, 5).map((g) => g.nonce)).toEqual([1, 2]);
    expect(oneRequestOf(groups, 6).map((g) => g.nonce)).toEqual([1, 2, 7]);
    expect(oneRequestOf(groups, 200).map((g) => g.nonce)).toEqual([1, 2, 7, 3]);
  });

  it("takes the first group even when it alone is larger than the batch (else no group would ever be asked)", () => {
    const groups = [group(A, 1, 6), group(B, 2, 1)];
    expect(oneRequestOf(groups, 4).map((g) => g.nonce)).toEqual([1]);
    expect(oneRequestOf(groups, 1).map((g) => g.nonce)).toEqual([1]);
    expect(oneRequestOf([], 4)).toEqual([]);
  });
});
