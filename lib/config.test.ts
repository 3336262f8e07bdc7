import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, ConfigError, LOCAL_RELAYER_KEYS, parseConfig } from "./config";

describe("configuration", () => {
  it("applies the decisions' defaults to an empty environment", () => {
    const c = parseConfig({});
    expect(c).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      rpcUrl: undefined,
      sponsorAmountWei: 10_000_000_000_000_000n,
      workerIntervalMs: 5000,
      rateLimitIpPerHour: 10,
      rateLimitWalletPerHour: 5,
      registerLimitIpPerHour: 100,
      autoBlockMinutes: 15,
      replayWindowMs: 5000,
      maxRelayAttempts: 5,
      relayTimeoutMs: 60_000,
      confirmations: 1,
      trustProxy: 0,
      corsOrigins: [],
      embeddedPgPort: 54329,
      localChainPort: 8545,
      localBlockTime: 1,
    });
    expect(c.relayerPrivateKeys).toEqual(LOCAL_RELAYER_KEYS);
    expect(c.dataDir.endsWith(".data")).toBe(true);
  });

  it("uses no default relayer keys against a real network", () => {
    expect(parseConfig({ RPC_URL: "https://rpc.example.org" }).relayerPrivateKeys).toEqual([]);
  });

  it("parses lists, origins and keys", () => {
    const key = `0x${"Ab".repeat(32)}`;
    const c = parseConfig({ CORS_ORIGINS: "https://a.example.org/path, http://b.example.org:8080", RELAYER_PRIVATE_KEYS: ` ${key} ,${key}` });
    expect(c.corsOrigins).toEqual(["https://a.example.org", "http://b.example.org:8080"]);
    expect(c.relayerPrivateKeys).toEqual([key.toLowerCase(), key.toLowerCase()]);
  });

  it.each([
    ["PORT", "abc", /^Invalid configuration: PORT must be a whole number$/],
    ["WORKER_INTERVAL_MS", "fast", /^Invalid configuration: WORKER_INTERVAL_MS /],
    ["RELAYER_PRIVATE_KEYS", "0x1234", /^Invalid configuration: RELAYER_PRIVATE_KEYS\.0 must be 0x followed by 64 hex characters$/],
    ["DATABASE_URL", "not a url", /^Invalid configuration: DATABASE_URL must be a URL$/],
    ["TREASURY_ADDRESS", "0x12", /^Invalid configuration: TREASURY_ADDRESS /],
    ["CONFIRMATIONS", "0", /^Invalid configuration: CONFIRMATIONS /],
    ["SPONSOR_AMOUNT_WEI", "0", /^Invalid configuration: SPONSOR_AMOUNT_WEI must be greater than 0$/],
    ["SPONSOR_AMOUNT_WEI", (2n ** 128n).toString(), /^Invalid configuration: SPONSOR_AMOUNT_WEI must be less than 2\^128$/],
  ])("stops on a bad %s with one line naming it", (name, value, message) => {
    let error: unknown;
    try {
      parseConfig({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain("\n");
  });

  it("lists every variable in .env.example (set, or commented out with its meaning)", () => {
    const example = readFileSync(path.resolve(import.meta.dirname, "..", ".env.example"), "utf8");
    const listed = new Set([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]));
    expect(CONFIG_VARIABLES.filter((name) => !listed.has(name))).toEqual([]);
    expect(CONFIG_VARIABLES).toContain("CONFIRMATIONS");
  });
});
