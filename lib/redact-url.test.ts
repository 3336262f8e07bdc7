import { describe, expect, it } from "vitest";
import { redactedUrl, withoutUrl } from "./redact-url";

describe("URLs as they may be shown, logged or stored (lib/redact-url.ts)", () => {
  it("keeps the origin and hides what follows it, user name and password included", () => {
    expect(redactedUrl("https://hooks.example.com/services/T000/B000/XXXX")).toBe("https://hooks.example.com/[redacted]");
    expect(redactedUrl("http://127.0.0.1:4210/hook?token=sekrit123")).toBe("http://127.0.0.1:4210/[redacted]");
    expect(redactedUrl("https://u:p@rpc.example.org")).toBe("https://rpc.example.org/[redacted]");
    expect(redactedUrl("https://rpc.example.org/")).toBe("https://rpc.example.org");
    expect(redactedUrl("not a url")).toBe("[redacted]");
  });

  it("takes every spelling of the URL out of a message that quotes it", () => {
    const url = "http://hook:pa55@127.0.0.1:4210/hook?token=sekrit123";
    expect(withoutUrl(`Request cannot be constructed from a URL that includes credentials: ${url}`, url)).toBe(
      "Request cannot be constructed from a URL that includes credentials: http://127.0.0.1:4210/[redacted]",
    );
    expect(withoutUrl("ECONNREFUSED", url)).toBe("ECONNREFUSED");
  });
});
