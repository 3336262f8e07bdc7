import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, ConfigError, developmentSecretsRefusal, LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS, parseConfig } from "./config";

describe("configuration", () => {
  it("applies the decisions' defaults to an empty environment", () => {
    const c = parseConfig({});
    expect(c).toMatchObject({
      port: 3000,
      databaseUrl: undefined,
      rpcUrl: undefined,
      sponsorAmountWei: 10_000_000_000_000_000n,
      workerIntervalMs: 5000,
      workerBatchWindowMs: 50,
      rateLimitIpPerHour: 10,
      rateLimitWalletPerHour: 5,
      registerLimitIpPerHour: 100,
      autoBlockMinutes: 15,
      replayWindowMs: 5000,
      maxRelayAttempts: 5,
      relayTimeoutMs: 60_000,
      confirmations: 1,
      ipRetentionDays: 90,
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

  it("reads MAX_FEE_PER_GAS_GWEI as wei (decimals allowed), 0 or unset as no ceiling", () => {
    expect(parseConfig({}).maxFeePerGasWei).toBeUndefined();
    expect(parseConfig({ MAX_FEE_PER_GAS_GWEI: "0" }).maxFeePerGasWei).toBeUndefined();
    expect(parseConfig({ MAX_FEE_PER_GAS_GWEI: "50" }).maxFeePerGasWei).toBe(50_000_000_000n);
    expect(parseConfig({ MAX_FEE_PER_GAS_GWEI: "1.5" }).maxFeePerGasWei).toBe(1_500_000_000n);
    expect(parseConfig({ MAX_FEE_PER_GAS_GWEI: "0.000000001" }).maxFeePerGasWei).toBe(1n);
  });

  it("reads IP_RETENTION_DAYS as whole days, 90 by default, 0 to keep IP addresses for ever", () => {
    expect(parseConfig({}).ipRetentionDays).toBe(90);
    expect(parseConfig({ IP_RETENTION_DAYS: " 30 " }).ipRetentionDays).toBe(30);
    expect(parseConfig({ IP_RETENTION_DAYS: "0" }).ipRetentionDays).toBe(0);
    expect(parseConfig({ IP_RETENTION_DAYS: "" }).ipRetentionDays).toBe(90);
  });

  it("reads RPC_BATCH_SIZE, 200 calls per batched request unless set", () => {
    expect(parseConfig({}).rpcBatchSize).toBe(200);
    expect(parseConfig({ RPC_BATCH_SIZE: "10" }).rpcBatchSize).toBe(10);
  });

  it("reads RPC_URL as one endpoint or a comma-separated list of them", () => {
    expect(parseConfig({}).rpcUrls).toEqual([]);
    const one = parseConfig({ RPC_URL: "https://rpc.example.org/key" });
    expect([one.rpcUrl, one.rpcUrls]).toEqual(["https://rpc.example.org/key", ["https://rpc.example.org/key"]]);
    const two = parseConfig({ RPC_URL: " https://a.example.org , http://127.0.0.1:8545 " });
    expect([two.rpcUrl, two.rpcUrls]).toEqual(["https://a.example.org", ["https://a.example.org", "http://127.0.0.1:8545"]]);
  });

  it.each([
    ["MAX_FEE_PER_GAS_GWEI", "fifty", /^Invalid configuration: MAX_FEE_PER_GAS_GWEI must be a number of gwei/],
    ["MAX_FEE_PER_GAS_GWEI", "-1", /^Invalid configuration: MAX_FEE_PER_GAS_GWEI must be a number of gwei/],
    ["MAX_FEE_PER_GAS_GWEI", "1.0000000001", /^Invalid configuration: MAX_FEE_PER_GAS_GWEI must be a number of gwei/],
    ["RPC_URL", "https://a.example.org,not a url", /^Invalid configuration: RPC_URL\.1 must be a URL$/],
    ["RPC_URL", "ws://a.example.org", /^Invalid configuration: RPC_URL\.0 must be an http:\/\/ or https:\/\/ URL$/],
    ["PORT", "abc", /^Invalid configuration: PORT must be a whole number$/],
    ["WORKER_INTERVAL_MS", "fast", /^Invalid configuration: WORKER_INTERVAL_MS /],
    ["WORKER_BATCH_WINDOW_MS", "-1", /^Invalid configuration: WORKER_BATCH_WINDOW_MS /],
    ["WORKER_BATCH_WINDOW_MS", "soon", /^Invalid configuration: WORKER_BATCH_WINDOW_MS /],
    ["RPC_BATCH_SIZE", "0", /^Invalid configuration: RPC_BATCH_SIZE must be at least 1$/],
    ["RPC_BATCH_SIZE", "1001", /^Invalid configuration: RPC_BATCH_SIZE must be at most 1000$/],
    ["RELAYER_PRIVATE_KEYS", "0x1234", /^Invalid configuration: RELAYER_PRIVATE_KEYS\.0 must be 0x followed by 64 hex characters$/],
    ["DATABASE_URL", "not a url", /^Invalid configuration: DATABASE_URL must be a URL$/],
    ["TREASURY_ADDRESS", "0x12", /^Invalid configuration: TREASURY_ADDRESS /],
    ["CONFIRMATIONS", "0", /^Invalid configuration: CONFIRMATIONS /],
    ["IP_RETENTION_DAYS", "-1", /^Invalid configuration: IP_RETENTION_DAYS must be a whole number$/],
    ["IP_RETENTION_DAYS", "7.5", /^Invalid configuration: IP_RETENTION_DAYS must be a whole number$/],
    ["IP_RETENTION_DAYS", "90d", /^Invalid configuration: IP_RETENTION_DAYS must be a whole number$/],
    ["IP_RETENTION_DAYS", "36501", /^Invalid configuration: IP_RETENTION_DAYS must be at most 36500$/],
    ["SPONSOR_AMOUNT_WEI", "0", /^Invalid configuration: SPONSOR_AMOUNT_WEI must be greater than 0$/],
    ["SPONSOR_AMOUNT_WEI", (2n ** 128n).toString(), /^Invalid configuration: SPONSOR_AMOUNT_WEI must be less than 2\^128$/],
    // 64 hex characters that are no secp256k1 key: viem threw on them later, in a worker restarted for ever.
    ["RELAYER_PRIVATE_KEYS", `0x${"0".repeat(64)}`, /^Invalid configuration: RELAYER_PRIVATE_KEYS\.0 is not a valid secp256k1 private key/],
    ["DEPLOYER_PRIVATE_KEY", `0x${"f".repeat(64)}`, /^Invalid configuration: DEPLOYER_PRIVATE_KEY is not a valid secp256k1 private key/],
    // Not hex, or without 0x: one line, never an exception that carries the key.
    ["RELAYER_PRIVATE_KEYS", "ab".repeat(32), /^Invalid configuration: RELAYER_PRIVATE_KEYS\.0 must be 0x followed by 64 hex characters$/],
    ["DEPLOYER_PRIVATE_KEY", `0x${"z".repeat(64)}`, /^Invalid configuration: DEPLOYER_PRIVATE_KEY must be 0x followed by 64 hex characters$/],
    ["METRICS_PORT", "65535", /^Invalid configuration: METRICS_PORT must be at most 65534$/],
    ["CORS_ORIGINS", "https://ok.example,capacitor://localhost", /^Invalid configuration: CORS_ORIGINS\.1 must list http:\/\/ or https:\/\/ origins/],
    ["EXPLORER_URL", "javascript:alert(1)", /^Invalid configuration: EXPLORER_URL must be an http:\/\/ or https:\/\/ URL$/],
    ["DATABASE_URL", "mysql://db.example.org/faucet", /^Invalid configuration: DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/],
    ["DATABASE_URL", "localhost:5432/faucet", /^Invalid configuration: DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL/],
    ["REGISTRY_ADDRESS", `0x${"12".repeat(20)}`, /^Invalid configuration: TREASURY_ADDRESS is missing \(REGISTRY_ADDRESS and TREASURY_ADDRESS go together\)$/],
    ["TREASURY_ADDRESS", `0x${"12".repeat(20)}`, /^Invalid configuration: REGISTRY_ADDRESS is missing \(REGISTRY_ADDRESS and TREASURY_ADDRESS go together\)$/],
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

  const refusalOf = (env: Record<string, string>): string | undefined => {
    try {
      parseConfig(env);
      return undefined;
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).not.toContain("\n");
      return (error as Error).message;
    }
  };

  describe('webhooks (decisions.md "Operators are told")', () => {
    const secret = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;

    it("reads WEBHOOK_URLS as a comma-separated list (empty: none) with its WEBHOOK_SECRET", () => {
      expect(parseConfig({}).webhookUrls).toEqual([]);
      expect(parseConfig({ WEBHOOK_URLS: "" }).webhookUrls).toEqual([]);
      const c = parseConfig({ WEBHOOK_URLS: " https://a.example.org/hook , http://127.0.0.1:9000/x ", WEBHOOK_SECRET: secret });
      expect([c.webhookUrls, c.webhookSecret]).toEqual([["https://a.example.org/hook", "http://127.0.0.1:9000/x"], secret]);
    });

    it.each([
      [
        "WEBHOOK_URLS without a secret",
        { WEBHOOK_URLS: "https://a.example.org/hook" },
        /^Invalid configuration: WEBHOOK_SECRET must be set when WEBHOOK_URLS is set/,
      ],
      [
        "a secret not whsec_",
        { WEBHOOK_URLS: "https://a.example.org/hook", WEBHOOK_SECRET: Buffer.alloc(32, 1).toString("base64") },
        /^Invalid configuration: WEBHOOK_SECRET must be whsec_ followed by base64/,
      ],
      [
        "a whsec_ secret of fewer than 24 bytes",
        { WEBHOOK_SECRET: `whsec_${Buffer.alloc(16, 1).toString("base64")}` },
        /^Invalid configuration: WEBHOOK_SECRET must be whsec_ /,
      ],
      [
        "a whsec_ secret that is not base64",
        { WEBHOOK_SECRET: "whsec_not base64 at all!!!!!!!!!!!!!!!!!" },
        /^Invalid configuration: WEBHOOK_SECRET must be whsec_ /,
      ],
      [
        "a user name and password in WEBHOOK_URLS (fetch refuses such a URL: every event would be given up after 24 h)",
        { WEBHOOK_URLS: "https://a.example.org/hook,https://hook:pa55@b.example.org/hook", WEBHOOK_SECRET: secret },
        /^Invalid configuration: WEBHOOK_URLS\.1 must not carry a user name or password/,
      ],
      [
        "a non-URL in WEBHOOK_URLS",
        { WEBHOOK_URLS: "https://a.example.org,not a url", WEBHOOK_SECRET: secret },
        /^Invalid configuration: WEBHOOK_URLS\.1 must be a URL$/,
      ],
      [
        "a URL that is not http(s)",
        { WEBHOOK_URLS: "ftp://a.example.org", WEBHOOK_SECRET: secret },
        /^Invalid configuration: WEBHOOK_URLS\.0 must be an http:\/\/ or https:\/\/ URL$/,
      ],
    ])("stops on %s with one line naming the variable", (_what, env, message) => {
      expect(refusalOf(env)).toMatch(message);
    });
  });

  describe("ADMIN_TOKEN strength (issue 11, item 4)", () => {
    it.each([
      ["shorter than 32 characters", "Zq3-vX9_pL2mN8kR4tY6wB1cD5eF7g", /^Invalid configuration: ADMIN_TOKEN must be at least 32 characters/],
      [
        "of fewer than 10 distinct characters",
        "abcdefghiabcdefghiabcdefghiabcdefghi".replace(/i/g, "a"),
        /^Invalid configuration: ADMIN_TOKEN has too little variety/,
      ],
      ["one piece repeated", "0123456789ab".repeat(4), /^Invalid configuration: ADMIN_TOKEN has too little variety/],
      ["one character repeated", "x".repeat(64), /^Invalid configuration: ADMIN_TOKEN has too little variety/],
    ])("refuses a configured token %s with one line naming ADMIN_TOKEN", (_what, token, message) => {
      expect(refusalOf({ ADMIN_TOKEN: token })).toMatch(message);
    });

    it("accepts a random token of 32 characters, like the one npm start generates", () => {
      expect(parseConfig({ ADMIN_TOKEN: "pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA" }).adminToken).toBe("pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA");
    });

    it("leaves out surrounding whitespace (a secret file's newline), which the sign-in form and a bearer header never carry", () => {
      expect(parseConfig({ ADMIN_TOKEN: " pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA\n" }).adminToken).toBe("pQ7sV2xK9mW4zR1tB8nC5yL3hF6gD0jA");
    });
  });

  describe("anvil's well-known keys off the local chain (issue 11, item 8)", () => {
    const relayer = LOCAL_RELAYER_KEYS[0]!;
    it("refuses them in RELAYER_PRIVATE_KEYS or DEPLOYER_PRIVATE_KEY with a remote RPC_URL, naming the variable", () => {
      expect(refusalOf({ RPC_URL: "https://rpc.sepolia.example.org", RELAYER_PRIVATE_KEYS: `0x${"ab".repeat(32)},${relayer}` })).toMatch(
        /^Invalid configuration: RELAYER_PRIVATE_KEYS holds a well-known anvil development key, refused because RPC_URL is not a loopback address$/,
      );
      expect(refusalOf({ RPC_URL: "http://10.0.0.5:8545", DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY })).toMatch(/^Invalid configuration: DEPLOYER_PRIVATE_KEY /);
    });

    it("refuses them on a loopback RPC_URL whose chain id is not 31337 (a tunnel to a real network)", () => {
      expect(refusalOf({ RPC_URL: "http://127.0.0.1:8545", CHAIN_ID: "11155111", RELAYER_PRIVATE_KEYS: relayer })).toMatch(
        /^Invalid configuration: RELAYER_PRIVATE_KEYS .* the chain id is 11155111, not 31337$/,
      );
    });

    it("accepts them on the local chain: RPC_URL unset, or loopback with chain id 31337", () => {
      expect(refusalOf({ RELAYER_PRIVATE_KEYS: relayer })).toBeUndefined();
      expect(refusalOf({ RPC_URL: "http://127.0.0.1:8545", RELAYER_PRIVATE_KEYS: relayer, DEPLOYER_PRIVATE_KEY: LOCAL_DEPLOYER_KEY })).toBeUndefined();
      expect(refusalOf({ RPC_URL: "http://localhost:8545", CHAIN_ID: "31337", RELAYER_PRIVATE_KEYS: relayer })).toBeUndefined();
      expect(refusalOf({ RPC_URL: "https://rpc.example.org", RELAYER_PRIVATE_KEYS: `0x${"ab".repeat(32)}` })).toBeUndefined();
    });

    it("refuses a generated administrator token (ADMIN_TOKEN unset) off the local chain, and a chain id read from the RPC", () => {
      const remote = parseConfig({ RPC_URL: "https://rpc.example.org" });
      expect(developmentSecretsRefusal(remote, undefined, { generatedAdminToken: true })).toMatch(/^Invalid configuration: ADMIN_TOKEN must be set/);
      const loopback = parseConfig({ RPC_URL: "http://127.0.0.1:8545", RELAYER_PRIVATE_KEYS: relayer });
      expect(developmentSecretsRefusal(loopback, 31337, { generatedAdminToken: true })).toBeUndefined();
      expect(developmentSecretsRefusal(loopback, 1)).toMatch(/^Invalid configuration: RELAYER_PRIVATE_KEYS .* chain id is 1, not 31337$/);
    });
  });

  it("lists every variable in .env.example (set, or commented out with its meaning)", () => {
    const example = readFileSync(path.resolve(import.meta.dirname, "..", ".env.example"), "utf8");
    const listed = new Set([...example.matchAll(/^#?\s*([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]));
    expect(CONFIG_VARIABLES.filter((name) => !listed.has(name))).toEqual([]);
    expect(CONFIG_VARIABLES).toContain("CONFIRMATIONS");
  });
});
