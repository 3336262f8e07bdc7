/** Wallet addresses (interface-spec 4: `^0x[0-9a-fA-F]{40}$`, at most 42 characters; stored lowercase). */
export const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;

export type Address = `0x${string}`;

/** The lowercase form of a valid address, or `undefined` when the input is not one. */
export function normalizeAddress(input: unknown): Address | undefined {
  if (typeof input !== "string" || input.length !== 42 || !ADDRESS_PATTERN.test(input)) return undefined;
  return input.toLowerCase() as Address;
}
