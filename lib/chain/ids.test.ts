import { describe, expect, it } from "vitest";
import { bytes16ToUuid, uuidToBytes16 } from "./ids";

describe("request ids on-chain", () => {
  it("a UUID becomes 0x and its 32 hex digits, lowercase, and comes back unchanged", () => {
    const id = "0B8C2A4E-1F2D-4C3B-9A8E-7D6C5B4A3F21";
    expect(uuidToBytes16(id)).toBe("0x0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21");
    expect(bytes16ToUuid(uuidToBytes16(id))).toBe(id.toLowerCase());
    const random = crypto.randomUUID();
    expect(bytes16ToUuid(uuidToBytes16(random))).toBe(random);
  });

  it("refuses what is not a canonical UUID or a bytes16", () => {
    expect(() => uuidToBytes16("0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21")).toThrow(TypeError);
    expect(() => uuidToBytes16("not-a-uuid")).toThrow(TypeError);
    expect(() => bytes16ToUuid("0x1234")).toThrow(TypeError);
    expect(() => bytes16ToUuid("0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21")).toThrow(TypeError);
  });
});
