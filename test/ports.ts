import { createServer } from "node:net";

/**
 * Ports for servers a test starts in another process (anvil, PostgreSQL, `server.ts`, `npm start`).
 *
 * Such a port is chosen before the child binds it, often seconds before (a Next.js server takes that long to
 * start). A port the OS hands out for `listen(0)` is in its ephemeral range (32768-60999 here) and may be handed
 * to another test's server, or used as a connection's source port, in that window: CI once saw one test's web
 * server answered by another test's whole stack. So these ports come from below the ephemeral range, where the
 * OS never hands out a port by itself, and each test process takes them from a band of its own: Vitest's worker
 * slot (`VITEST_POOL_ID`), Playwright's (`TEST_PARALLEL_INDEX`), or band 0 for the main process and scripts.
 * Two processes running at once never share a band, and a process never returns the same port twice in a row of
 * `BAND_SIZE` calls. A port still bound (by something left from an earlier test file in the same slot, or by
 * anything else on the machine) is skipped.
 */
// TEST_PORT_BASE moves the whole range, so two checkouts can run their suites side by side (each below the
// ephemeral range, each with bands of its own).
const FIRST_PORT = Number(process.env.TEST_PORT_BASE ?? 20_000);
const BAND_SIZE = 400;
const PLAYWRIGHT_BANDS_FROM = 16;
const BANDS = 28; // 20,000 + 28 x 400 = 31,200: below the ephemeral range.

function band(): number {
  const vitest = Number(process.env.VITEST_POOL_ID);
  if (Number.isInteger(vitest) && vitest > 0) return vitest % PLAYWRIGHT_BANDS_FROM;
  const playwright = Number(process.env.TEST_PARALLEL_INDEX);
  if (process.env.TEST_PARALLEL_INDEX !== undefined && Number.isInteger(playwright) && playwright >= 0) {
    return PLAYWRIGHT_BANDS_FROM + (playwright % (BANDS - PLAYWRIGHT_BANDS_FROM));
  }
  return 0;
}

// A random start within the band, so a new process in the same slot does not begin on the ports the last one
// may still be releasing.
let next = Math.floor(Math.random() * BAND_SIZE);

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A TCP port on 127.0.0.1 that is free now and that no other test process will be given (see above). */
export async function freePort(): Promise<number> {
  const base = FIRST_PORT + band() * BAND_SIZE;
  for (let tried = 0; tried < BAND_SIZE; tried++) {
    const port = base + (next++ % BAND_SIZE);
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port in ${base}-${base + BAND_SIZE - 1}`);
}
