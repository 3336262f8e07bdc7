// @ts-check
import { writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * A Next.js deployment adapter (next.config.ts `adapterPath`: the framework's documented build hook, see
 * node_modules/next/dist/docs/01-app/03-api-reference/07-adapters). When `next build` completes it writes
 * `.next/api-entrypoints.json`: the API's route handlers (app/(api)) with their paths and built entrypoints, which
 * server.ts invokes directly (lib/http/entrypoints.ts). It changes nothing in the build.
 *
 * Left out, so Next serves them as before:
 * - the catch-all (`app/(api)/[...path]`): only Next knows every path it must not take (pages, `/_next/` files);
 * - `/openapi.json`: Next compresses it (70 KB, 7 KB gzipped), while the API's answers are a few hundred bytes;
 * - the `.rsc` twin of each path (for Next's client router).
 */

const SERVED_BY_NEXT = new Set(["/openapi.json"]);

/** The file in the build directory; lib/http/entrypoints.ts reads it (lib/http/entrypoints.test.ts ties the two). */
export const ENTRYPOINTS_FILE = "api-entrypoints.json";

/** @type {import("next").NextAdapter} */
const adapter = {
  name: "gas-sponsorship-api-entrypoints",
  async onBuildComplete({ outputs, distDir }) {
    const routes = outputs.appRoutes
      .filter(
        (r) =>
          r.runtime === "nodejs" &&
          r.sourcePage.startsWith("/(api)/") &&
          !r.pathname.endsWith(".rsc") &&
          !r.pathname.includes("[...") &&
          !SERVED_BY_NEXT.has(r.pathname),
      )
      // Relative, so the build can move with the project.
      .map((r) => ({ pathname: r.pathname, entrypoint: path.relative(distDir, r.filePath) }))
      .sort((a, b) => (a.pathname < b.pathname ? -1 : 1));
    await writeFile(path.join(distDir, ENTRYPOINTS_FILE), `${JSON.stringify({ routes }, null, 2)}\n`);
  },
};

export default adapter;
