import { afterEach, describe, expect, it, vi } from "vitest";
import { resetConfigForTests } from "./config";
import { createLogger } from "./log";

/** Log files are read by more people than the configuration: a credential inside a configured URL stays out. */

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
  resetConfigForTests();
  vi.restoreAllMocks();
});

function captured(): string[] {
  const lines: string[] = [];
  const capture = (chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  };
  vi.spyOn(process.stdout, "write").mockImplementation(capture);
  vi.spyOn(process.stderr, "write").mockImplementation(capture);
  return lines;
}

describe("log lines", () => {
  it("name a configured URL that carries a key, token or password by its origin alone, also as viem quotes it", () => {
    Object.assign(process.env, {
      LOG_LEVEL: "info",
      RPC_URL: "https://eth-sepolia.example.net/v2/PROVIDERKEY123,https://user:PASSWORD9@rpc.example.org/path?apikey=QUERYKEY456",
      WEBHOOK_URLS: "https://hooks.example.com/services/T000/B000/WEBHOOKTOKEN789",
      WEBHOOK_SECRET: `whsec_${Buffer.alloc(32, 7).toString("base64")}`,
      DATABASE_URL: "postgres://app:DBPASSWORD@127.0.0.1:5432/app",
    });
    resetConfigForTests();
    const lines = captured();
    const logger = createLogger();
    // viem's HttpRequestError message: "URL: <the URL without user and password>".
    const viemLike = new Error("HTTP request failed.\n\nURL: https://rpc.example.org/path?apikey=QUERYKEY456\nRequest body: {}");
    logger.warn("chain read failed", { error: viemLike, endpoint: "https://eth-sepolia.example.net/v2/PROVIDERKEY123" });
    logger.error("delivery failed", { url: "https://hooks.example.com/services/T000/B000/WEBHOOKTOKEN789" });
    logger.info("database", { url: "postgres://app:DBPASSWORD@127.0.0.1:5432/app" });
    const text = lines.join("");
    for (const secret of ["PROVIDERKEY123", "PASSWORD9", "QUERYKEY456", "WEBHOOKTOKEN789", "DBPASSWORD"]) expect(text).not.toContain(secret);
    expect(text).toContain("https://eth-sepolia.example.net/[redacted]");
    expect(text).toContain("URL: https://rpc.example.org/[redacted]");
    expect(text).toContain("https://hooks.example.com/[redacted]");
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
  });

  it("go to a sink instead of stdout and stderr when given one: every level, a child's fields, errors whole, redacted", () => {
    Object.assign(process.env, { LOG_LEVEL: "silent", RPC_URL: "https://eth-sepolia.example.net/v2/PROVIDERKEY123" });
    resetConfigForTests();
    const written = captured();
    const kept: string[] = [];
    const logger = createLogger({ test: "sink" }, (line) => kept.push(line)).child({ workerId: "w1" });
    logger.debug("asked", { endpoint: "https://eth-sepolia.example.net/v2/PROVIDERKEY123" });
    logger.error("failed", { error: new Error("boom") });
    expect(written).toEqual([]);
    const lines = kept.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((l) => [l.level, l.msg, l.test, l.workerId])).toEqual([
      ["debug", "asked", "sink", "w1"],
      ["error", "failed", "sink", "w1"],
    ]);
    expect(kept.join("")).not.toContain("PROVIDERKEY123");
    expect((lines[1]!.error as { message: string }).message).toBe("boom");
  });

  it("leaves a URL without a path, query or user as it is", () => {
    Object.assign(process.env, { LOG_LEVEL: "info", RPC_URL: "http://127.0.0.1:8545" });
    resetConfigForTests();
    const lines = captured();
    createLogger().warn("chain read failed", { endpoint: "http://127.0.0.1:8545" });
    expect(lines.join("")).toContain('"endpoint":"http://127.0.0.1:8545"');
  });
});
