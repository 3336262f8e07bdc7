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
// The patch: `nextWrite` without a socket rejects what waits on the connection with CONNECTION_CLOSED (the
// error postgres.js gives for a closed connection everywhere else) instead of throwing; `closed()` forgets the
// cancelled immediate and the bytes meant for the dead socket. Idempotent; it refuses to guess on other text.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const MARK = "/* sponsorship-service: guarded against a closed socket (porsager/postgres#1208) */";

const NEXT_WRITE = "  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n";
const NEXT_WRITE_PATCHED = `  function nextWrite(fn) {
    ${MARK}
    if (!socket) {
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)
`;
const CLOSED = "    incomings = null\n    clearImmediate(nextWriteTimer)\n    socket.removeListener('data', data)\n";
const CLOSED_PATCHED = "    incomings = null\n    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null\n    socket.removeListener('data', data)\n";

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

export function patchPostgres() {
  const dir = packageDir();
  const version = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version;
  const results = [];
  for (const variant of ["src", "cjs/src", "cf/src"]) {
    const file = path.join(dir, variant, "connection.js");
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    if (text.includes(MARK)) {
      results.push(`${variant}: already patched`);
      continue;
    }
    if (!text.includes(NEXT_WRITE) || !text.includes(CLOSED)) {
      results.push(`${variant}: NOT patched (postgres ${version}: the code differs from 3.4.9; check whether the fix is released)`);
      continue;
    }
    writeFileSync(file, text.replace(NEXT_WRITE, NEXT_WRITE_PATCHED).replace(CLOSED, CLOSED_PATCHED));
    results.push(`${variant}: patched`);
  }
  return { version, results };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { version, results } = patchPostgres();
  const line = `postgres ${version}: ${results.join("; ")}`;
  if (results.some((r) => r.includes("NOT patched"))) console.warn(`WARNING ${line}`);
  else console.log(line);
}
