import { keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { requestIdHash, uuidToBytes16 } from "./ids";

describe("request ids on-chain", () => {
  it("a UUID becomes 0x and its 32 hex digits, lowercase", () => {
    expect(uuidToBytes16("0B8C2A4E-1F2D-4C3B-9A8E-7D6C5B4A3F21")).toBe("0x0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21");
  });

  it("the on-chain value is keccak256 of the id's 16 bytes, the same in any case, and holds no part of the id", () => {
    const id = "0b8c2a4e-1f2d-4c3b-9a8e-7d6c5b4a3f21";
    expect(requestIdHash(id)).toBe(keccak256("0x0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21"));
    expect(requestIdHash(id.toUpperCase())).toBe(requestIdHash(id));
    expect(requestIdHash(id)).toMatch(/^0x[0-9a-f]{64}$/);
    expect(requestIdHash(id)).not.toContain("0b8c2a4e");
    const random = crypto.randomUUID();
    expect(requestIdHash(random)).not.toBe(requestIdHash(crypto.randomUUID()));
  });

  it("refuses what is not a canonical UUID", () => {
    expect(() => uuidToBytes16("0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21")).toThrow(TypeError);
    expect(() => uuidToBytes16("not-a-uuid")).toThrow(TypeError);
    expect(() => requestIdHash("0b8c2a4e1f2d4c3b9a8e7d6c5b4a3f21")).toThrow(TypeError);
  });
});
