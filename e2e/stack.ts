import path from "node:path";
import { embeddedServiceUrl } from "@/db/embedded";

/**
 * The stack the Playwright suite runs against: `npm start` (embedded PostgreSQL, local anvil, web server, worker)
 * on its own ports and its own data directory, so it never meets a developer's running service.
 */
export const E2E = {
  port: Number(process.env.E2E_PORT ?? 3310),
  pgPort: Number(process.env.E2E_PG_PORT ?? 31439),
  chainPort: Number(process.env.E2E_CHAIN_PORT ?? 8555),
  dataDir: path.resolve(process.env.E2E_DATA_DIR ?? ".data/e2e"),
  adminToken: "e2e-admin-token-0123456789abcdefghij",
  /** EXPLORER_URL of the stack: /request links transaction hashes to it. */
  explorerUrl: "https://explorer.e2e.invalid",
  /** REPLAY_WINDOW_MS of the stack (the default). */
  replayWindowMs: 5000,
  get baseURL() {
    return `http://127.0.0.1:${this.port}`;
  },
  /** The service role's URL (its password is in the data directory, written by the stack's first start). */
  get databaseUrl() {
    return embeddedServiceUrl(this.dataDir, this.pgPort);
  },
  get rpcUrl() {
    return `http://127.0.0.1:${this.chainPort}`;
  },
} as const;
