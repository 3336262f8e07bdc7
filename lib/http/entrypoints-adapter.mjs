// @ts-check
import { writeFile } from "node:fs/promises";
import path from "node:path";

/**
 * A Next.js deployment adapter (next.config.ts `adapterPath`: the framework's documented build hook, see
 * node_modules/next/dist/docs/01-app/03-api-reference/07-adapters). When `next build` completes it writes
 * `.next/api-entrypoints.json`: the public API's route handlers (app/(api)) with their paths and built entrypoints,
 * which server.ts invokes directly (lib/http/entrypoints.ts). With an adapter set, Next lays out some outputs for
 * adapters (prerendered files under route-cache keys); every page here renders on demand, and the e2e suite runs
 * against such a build.
 *
 * Left out, so Next serves them as before:
 * - the catch-all (`app/(api)/[...path]`): only Next knows every path it must not take (pages, `/_next/` files);
 * - the administrator's routes (`/admin/...`) and `/openapi.json`: Next compresses their answers (lists of up to
 *   200 rows, a 70-KB document), and none is a hot path; a public API answer is 20 KB at most;
 * - the `.rsc` twin of each path (for Next's client router).
 */

/** Served by Next (above): the catch-all, the administrator's routes, the OpenAPI document. */
const servedByNext = (pathname) => pathname.includes("[...") || pathname.startsWith("/admin/") || pathname === "/openapi.json";

/** The file in the build directory, which lib/http/entrypoints.ts reads. */
export const ENTRYPOINTS_FILE = "api-entrypoints.json";

/** @type {import("next").NextAdapter} */
const adapter = {
  name: "gas-sponsorship-api-entrypoints",
  async onBuildComplete({ outputs, distDir }) {
    const routes = outputs.appRoutes
      .filter((r) => r.runtime === "nodejs" && r.sourcePage.startsWith("/(api)/") && !r.pathname.endsWith(".rsc") && !servedByNext(r.pathname))
      // Relative, so the build can move with the project.
      .map((r) => ({ pathname: r.pathname, entrypoint: path.relative(distDir, r.filePath) }))
      .sort((a, b) => (a.pathname < b.pathname ? -1 : 1));
    await writeFile(path.join(distDir, ENTRYPOINTS_FILE), `${JSON.stringify({ routes }, null, 2)}\n`);
  },
};

export default adapter;
