import { keccak256, type Hex } from "viem";

/**
 * The treasury's `sponsor` call and its `Sponsored` event carry a hash of the request id, never the id itself
 * (decisions.md, "Privacy"): keccak256 of the request's UUID as its 16 bytes. Everything on-chain is public, and
 * the id need not be readable from a transaction (`GET /sponsorship/:id` answers its requester's IP and User-Agent
 * only to that requester: lib/sponsorship/reads.ts). The worker knows its ids and finds their events by this hash.
 */

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** `"0b8c…-…"` -> `"0x0b8c…"` (the 16 bytes, lowercase hex). Throws on anything but a canonical 8-4-4-4-12 UUID. */
export function uuidToBytes16(uuid: string): Hex {
  if (!UUID.test(uuid)) throw new TypeError(`not a UUID: ${uuid}`);
  return `0x${uuid.replaceAll("-", "").toLowerCase()}`;
}

/** keccak256 of the request id's 16 bytes: the `requestIdHash` of `sponsor` and of the `Sponsored` event. */
export function requestIdHash(uuid: string): Hex {
  return keccak256(uuidToBytes16(uuid));
}
