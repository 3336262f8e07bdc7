import { existsSync } from "node:fs";
import path from "node:path";

/**
 * The service reads its settings from its environment only (lib/config.ts), never from `.env` files: the supervisor
 * and the worker never did. Next.js, though, loads `.env.production.local`, `.env.local`, `.env.production` and `.env`
 * of its directory into `process.env` of a process that creates its server or runs `next build`, for every variable
 * not set already (`@next/env`, loadEnvConfig). So a `.env` written after .env.example configured the web server
 * alone, and behind the parsed configuration: among others it handed `RELAYER_PRIVATE_KEYS` and
 * `DEPLOYER_PRIVATE_KEY` back to the web server, whose environment npm start keeps free of them (docs/deployment.md,
 * "Secrets on a real network"). Marked as processed (Next's own mark for the processes it starts), Next loads none.
 */
export function keepNextFromEnvFiles(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  env.__NEXT_PROCESSED_ENV = "true";
  return env;
}

/** The `.env` files Next.js would have loaded from `dir`, which are ignored (for a warning at start-up). */
export function ignoredEnvFiles(dir: string): string[] {
  return [".env.production.local", ".env.local", ".env.production", ".env"].filter((name) => existsSync(path.join(dir, name)));
}
