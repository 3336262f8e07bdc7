import { describe, expect, it } from "vitest";
import { wagmiCookieHeader } from "./wagmi-cookie";

describe("the cookies /request hands to its client component", () => {
  it("keeps only wagmi's own cookies: the HttpOnly admin session never reaches the page", () => {
    const store = "sponsorship.wagmi.store=%7B%22state%22%3A%7B%7D%7D";
    const header = `admin_session=${"A".repeat(43)}; ${store}; other=1; sponsorship.wagmi.recentConnectorId=injected`;
    const kept = wagmiCookieHeader(header);
    expect(kept).toBe(`${store}; sponsorship.wagmi.recentConnectorId=injected`);
    expect(kept).not.toContain("admin_session");
    expect(wagmiCookieHeader(`admin_session=${"A".repeat(43)}`)).toBeNull();
    expect(wagmiCookieHeader(null)).toBeNull();
  });
});
