/** Wallet addresses (interface-spec 4: `^0x[0-9a-fA-F]{40}$`, at most 42 characters; stored lowercase). */
export const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;

/** viem's address type: the one the contracts' generated ABIs and every chain call use. */
export type { Address } from "viem";
import type { Address } from "viem";

/** The lowercase form of a valid address, or `undefined` when the input is not one. */
export function normalizeAddress(input: unknown): Address | undefined {
  if (typeof input !== "string" || input.length !== 42 || !ADDRESS_PATTERN.test(input)) return undefined;
  return input.toLowerCase() as Address;
}
