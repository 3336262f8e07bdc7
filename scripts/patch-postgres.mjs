// Runs after `npm install` (package.json "postinstall"). Patches the postgres.js driver (3.4.9, the latest
// release) against a process crash when the network drops a database connection: upstream issues
// porsager/postgres#1154 and #1208, fixes proposed in #1168, #1176 and #1209, none released.
//
// postgres.js defers small writes to a setImmediate. When the connection closes before it fires, `closed()`
// sets `socket = null` and `nextWrite` calls `socket.write` on null: a TypeError thrown from the immediate,
// which no caller can catch, so the process dies (seen in CI: a worker killed during a database outage; a
// reserved connection, as pipelinedTransaction holds, reaches it every time: db/driver.test.ts). `closed()`
// also cancels the immediate without forgetting it, so a connection that closed with a write pending never
// schedules another write on its next socket.
//
// A reserved connection (sql.reserve()) whose socket closed is also handed back to the pool by `release()` as if
// it were open: with no socket and nothing to reconnect it, every later query given to it fails, or waits for ever
// once it is parked as "full" (a pool of one then hangs).
//
// The patch:
// - `nextWrite` without a socket rejects the statements sent on that connection with CONNECTION_CLOSED (the error
//   postgres.js gives for a closed connection everywhere else) instead of throwing; a query the pool has already
//   handed to the connection's reconnect (`initial`) is left to it;
// - `closed()` and `terminate()` forget the cancelled immediate and the bytes meant for the dead socket;
// - `release()` of a reserved connection that closed (or is reconnecting, or ended) leaves it where the pool put
//   it, which reconnects it when a query needs it;
// - a `reserve()` that is rejected (its connect failed) leaves the pool's queue (see RESERVE_QUERY below).
// Idempotent; it refuses to guess on other text.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const MARK = "/* sponsorship-service: guarded against a closed socket (porsager/postgres#1208) */";

const NEXT_WRITE = "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n";
const NEXT_WRITE_PATCHED = `  function nextWrite(fn) {
    ${MARK}
    if (!socket) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      const reconnecting = initial
      initial = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      initial = reconnecting
      return false
    }
    const x = socket.write(chunk, fn)
`;
const CLOSED = "    incomings = null\n    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)\n";
const CLOSED_PATCHED = "    incomings = null\n    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener('data', data)\n";
const TERMINATE = "    clearImmediate(nextWriteTimer)\n    if (socket) {\n";
const TERMINATE_PATCHED = "    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    if (socket) {\n";
// A reserve() waiting for a connection is queued in the pool (`queries`) and handed to a connect as `initial`. When
// that connect fails (the database is down), the reserve is rejected but stays queued: the next connection that
// closes is connected again for it, and once one opens the pool hands it to the rejected reserve, which nobody
// releases. Each such connection is lost; with all of them lost every later query waits for ever (seen here: a
// worker stuck after a database outage, and a pool of 6 hung within six cut-and-restore rounds). The patch takes the
// reserve out of the queue when it is rejected.
const RESERVE_QUERY = "        const query = { reserve: resolve, reject }\n";
const RESERVE_QUERY_PATCHED =
  "        const query = { reserve: resolve, reject: e => (queries.remove(query), reject(e)) } /* sponsorship-service: a rejected reserve leaves the queue */\n";
const RELEASE = "    sql.release = () => {\n      c.reserved = null\n      onopen(c)\n    }\n";
const RELEASE_PATCHED = `    sql.release = () => {
      c.reserved = null
      ${MARK}
      if (c.queue === closed || c.queue === connecting || c.queue === ended)
        return
      onopen(c)
    }
`;

function packageDir() {
  try {
    return path.dirname(createRequire(import.meta.url).resolve("postgres/package.json"));
  } catch {
    // package.json is not exported by every version: find it from the entry point.
    let dir = path.dirname(createRequire(import.meta.url).resolve("postgres"));
    while (!existsSync(path.join(dir, "package.json")) || path.basename(dir) !== "postgres") dir = path.dirname(dir);
    return dir;
  }
}

/**
 * Applies `edits` ([original, patched] pairs) to `file`: each edit whose patched text is not there yet, when its
 * original text is; returns what it did ("NOT patched" when an edit finds neither).
 */
function patchFile(file, edits) {
  let text = readFileSync(file, "utf8");
  const pending = edits.filter(([, patched]) => !text.includes(patched));
  if (pending.length === 0) return "already patched";
  if (!pending.every(([original]) => text.includes(original))) return "NOT patched";
  for (const [original, patched] of pending) text = text.replace(original, patched);
  writeFileSync(file, text);
  return "patched";
}

export function patchPostgres() {
  const dir = packageDir();
  const version = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version;
  const results = [];
  for (const variant of ["src", "cjs/src", "cf/src"]) {
    if (!existsSync(path.join(dir, variant, "connection.js"))) continue;
    const connection = patchFile(path.join(dir, variant, "connection.js"), [
      [NEXT_WRITE, NEXT_WRITE_PATCHED],
      [CLOSED, CLOSED_PATCHED],
      [TERMINATE, TERMINATE_PATCHED],
    ]);
    const index = patchFile(path.join(dir, variant, "index.js"), [
      [RELEASE, RELEASE_PATCHED],
      [RESERVE_QUERY, RESERVE_QUERY_PATCHED],
    ]);
    for (const [file, outcome] of [
      ["connection.js", connection],
      ["index.js", index],
    ]) {
      results.push(
        `${variant}/${file}: ${outcome}${outcome === "NOT patched" ? ` (postgres ${version}: the code differs from 3.4.9; check whether the fix is released)` : ""}`,
      );
    }
  }
  return { version, results };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { version, results } = patchPostgres();
  const line = `postgres ${version}: ${results.join("; ")}`;
  if (results.some((r) => r.includes("NOT patched"))) console.warn(`WARNING ${line}`);
  else console.log(line);
}
