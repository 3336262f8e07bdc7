import type { PublicClient, Address } from "viem";
import { registryAbi } from "@/contracts/generated/registry";

/** Reads of the SponsorshipRegistry: has a wallet ever been sponsored? */

export type ContractReader = Pick<PublicClient, "readContract">;

/** Addresses per `areSponsored` call: 1,000 cold storage reads cost about 2.2M gas, far under any call gas cap. */
export const ARE_SPONSORED_CHUNK = 1_000;

export async function readIsSponsored(client: ContractReader, registry: Address, wallet: Address): Promise<boolean> {
  return client.readContract({ address: registry, abi: registryAbi, functionName: "isSponsored", args: [wallet] });
}

/**
 * `isSponsored` for many wallets through the registry's `areSponsored` view: one eth_call for up to
 * ARE_SPONSORED_CHUNK wallets (larger lists are split, the calls sent together). Keys are lowercase addresses.
 */
export async function readAreSponsored(client: ContractReader, registry: Address, wallets: readonly Address[]): Promise<Map<string, boolean>> {
  const unique = [...new Set(wallets.map((w) => w.toLowerCase() as Address))];
  const result = new Map<string, boolean>();
  if (unique.length === 0) return result;
  const chunks: Address[][] = [];
  for (let i = 0; i < unique.length; i += ARE_SPONSORED_CHUNK) chunks.push(unique.slice(i, i + ARE_SPONSORED_CHUNK));
  const answers = await Promise.all(
    chunks.map((chunk) => client.readContract({ address: registry, abi: registryAbi, functionName: "areSponsored", args: [chunk] })),
  );
  chunks.forEach((chunk, c) => {
    const flags = answers[c]!;
    if (flags.length !== chunk.length) throw new Error(`areSponsored answered ${flags.length} flags for ${chunk.length} wallets`);
    chunk.forEach((wallet, i) => result.set(wallet, flags[i]!));
  });
  return result;
}
