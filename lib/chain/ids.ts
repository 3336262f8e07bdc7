/**
 * The treasury's `Sponsored` event carries the request id as bytes16: the request's UUID, its 32 hex digits
 * without dashes (docs/contracts.md).
 */

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const BYTES16 = /^0x[0-9a-fA-F]{32}$/;

/** `"0b8c…-…"` -> `"0x0b8c…"` (lowercase). Throws on anything but a canonical 8-4-4-4-12 UUID. */
export function uuidToBytes16(uuid: string): `0x${string}` {
  if (!UUID.test(uuid)) throw new TypeError(`not a UUID: ${uuid}`);
  return `0x${uuid.replaceAll("-", "").toLowerCase()}`;
}

/** `"0x0b8c…"` (32 hex digits) -> the lowercase 8-4-4-4-12 UUID. */
export function bytes16ToUuid(hex: string): string {
  if (!BYTES16.test(hex)) throw new TypeError(`not a bytes16 hex string: ${hex}`);
  const h = hex.slice(2).toLowerCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
