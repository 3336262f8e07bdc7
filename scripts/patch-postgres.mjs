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
// once it is parked as "full" (a pool of one then hangs). Worse, the pool reconnects a closed connection for the
// next query that waits, while the reserved handle still points at it: what the holder sends next runs on a
// connection the pool shares (outside its transaction: a COMMIT or a write without the BEGIN and the row locks before
// it), or is written before the new connection's startup message (08P01), or is never answered (seen here: a
// worker's relay stage waiting for good on its BEGIN and the statements pipelined with it after PostgreSQL was
// SIGKILLed, scripts/self-healing.test.ts; reproduced in db/driver.test.ts).
//
// And a reserve() waiting in the pool's queue when a connection closes is taken out of the queue and handed to that
// connection's reconnect, which drops it (a new connection first fetches the array types and forgets a reserve it
// was opened for, relying on the queue): that reserve() never settles.
//
// The patch:
// - `nextWrite` without a socket rejects the statements sent on that connection with CONNECTION_CLOSED (the error
//   postgres.js gives for a closed connection everywhere else) instead of throwing; a query the pool has already
//   handed to the connection's reconnect (`initial`) is left to it;
// - `closed()` and `terminate()` forget the cancelled immediate and the bytes meant for the dead socket;
// - a socket closed without an error before the connection was ready fails the statement it was for and grows the
//   backoff, as a refusal does (with one host; see CLOSED_REJECT_PATCHED): it reconnected at once, for ever;
// - `closed()` rejects whatever is still waiting on the connection, also when the socket closed on an error: the
//   statements given to it between its 'error' and its 'close' were otherwise left waiting for ever; and it forgets
//   the statement that was in flight, its error and its rows, which the next socket took for its own answers;
// - a close while a new connection fetches the array types no longer ends the process (an unhandled rejection), and
//   a connection the server accepted resets the reconnect backoff whatever it was opened for;
// - a cursor whose connection closed while its callback ran stops there (it is rejected by the close);
// - a reservation ends with its connection: a statement sent on the reserved handle after the connection closed is
//   rejected with CONNECTION_CLOSED (never run on whatever the pool made of it), the ones queued behind a full
//   connection are rejected when it closes, and `release()` then does nothing: the pool has the connection back and
//   reconnects it when a query needs it;
// - a `reserve()` that is rejected (its connect failed) leaves the pool's queue (see RESERVE_QUERY below);
// - a `reserve()` handed to a reconnect stays in the queue, so the connection serves it once it is open (after it
//   fetched the array types: with `fetch_types` off, which this service never sets, 3.4.9 does not open such a
//   connection to the pool at all);
// - an `end()` waiting for a connection that failed returns when that connection closes (see CLOSED_ENDS below);
// - a transaction (`sql.begin()`, Drizzle's `db.transaction`) ends with its connection: a statement it sends after the
//   connection closed is rejected, never run outside the transaction on what the pool reconnected (see BEGIN_MARK);
// - a statement sent on a transaction after it ended, or on a reserved handle after release(), is rejected with its
//   own code, TRANSACTION_ENDED or RESERVATION_RELEASED (see ENDED_ERROR);
// - the option `answer_timeout` (seconds): a connection on which a statement waits and the server has sent nothing for
//   that long is given up, what waits on it fails with ANSWER_TIMEOUT (see ANSWER_MARK below).
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
// A socket that fails (ECONNRESET: the server process was killed) emits 'error', which rejects what is in flight, and
// 'close' only later (when its handle is closed). The pool still holds the connection in between, so a statement given
// to it then (the caller of the rejected one starting its next transaction at once) is written to the dead socket, and
// `closed()` rejected nothing after an error: that statement was never answered nor rejected (seen here: a worker's
// next stage waiting for good after PostgreSQL was SIGKILLed, scripts/self-healing.test.ts; db/driver.test.ts).
// `closed()` also kept the statement that was in flight (and its error and partial rows) for the next socket: a
// server still starting up then had its refusal (57P03) taken for that old statement's answer, so the statement the
// reconnect was for was neither sent nor rejected, and the connection reconnected at once, hundreds of times a second,
// until the server accepted; then that statement failed with the old error. (The second form below is what the
// previous version of this script made of the first.)
const CLOSED_REJECT = [
  "    if (initial)\n      return reconnect()\n\n    !hadError && (query || sent.length) && error(Errors.connection('CONNECTION_CLOSED', options, socket))\n",
  "    if (initial)\n      return reconnect()\n\n    if (query || sent.length) /* sponsorship-service: also after an error */\n      error(Errors.connection('CONNECTION_CLOSED', options, socket))\n",
];
// A socket the other side closes, without an error, before the connection is ready (a TCP proxy in front of
// PostgreSQL that accepts and hangs up while its server is gone, as the Cloud SQL Auth Proxy or HAProxy without a
// healthy backend do) was taken for the multi-host rotation: with one host, postgres.js reconnected at once, for
// ever, hundreds of times a second, and the statement the connection was for waited without end (so did every
// request behind it). With one host such a close is now a failed connect, as a refusal is: the statement fails
// with CONNECTION_CLOSED (or with the server's own error, when it sent one before closing: a shutdown's 57P01 while
// the new connection fetched the array types), the reconnect backoff grows, the next statement waiting gets the next
// attempt (db/driver.test.ts). With several hosts the rotation is upstream's, unchanged.
const CLOSED_REJECT_PATCHED = `    /* sponsorship-service: nothing of the closed socket is kept for the next one */
    if (initial) {
      const refusal = errorResponse
      query = results = errorResponse = null
      rows = 0
      if (options.host.length > 1)
        return reconnect()
      /* sponsorship-service: closed during the startup without an error: a failed connect, as a refusal */
      queryError(initial, refusal || Errors.connection('CONNECTION_CLOSED', options))
      initial = null
      hadError = true
    }

    if (query || sent.length) /* sponsorship-service: also after an error */
      error(Errors.connection('CONNECTION_CLOSED', options, socket))
    query = results = errorResponse = null
    rows = 0
`;
// A new connection fetches the array types before it serves anything. A close during that fetch rejected the fetch's
// own statement inside an async function nobody awaited: an unhandled rejection, which ends a Node process (the
// statement the connection was for is failed or retried by the close itself). And only a connection opened for a
// plain statement reset the pool's reconnect backoff once the server answered; one opened for a reserve() (every
// transaction here) left it growing, so each later close waited up to 20 s before reconnecting.
const FETCH_TYPES = "      if (needsTypes) {\n        initial.reserve && (initial = null)\n        return fetchArrayTypes()\n      }\n";
const FETCH_TYPES_PATCHED = `      if (needsTypes) {
        options.shared.retries = retries = 0 /* sponsorship-service: the server answered: the backoff starts again */
        initial.reserve && (initial = null)
        return fetchArrayTypes().catch(noop) /* sponsorship-service: a close during the fetch is not the process's error */
      }
`;
// A cursor's callback runs between two batches of rows; the connection may close meanwhile (and `closed()` then
// rejects the cursor and forgets it: see above). When the callback returns, the cursor went on with the connection's
// current statement: none (a TypeError thrown in an async function nobody awaits: the process ends) or another's.
const PORTAL_SUSPENDED = `  async function PortalSuspended() {
    try {
      const x = await Promise.resolve(query.cursorFn(result))
      rows = 0
      x === CLOSE
        ? write(Close(query.portal))
        : (result = new Result(), write(Execute('', query.cursorRows)))
    } catch (err) {
      write(Sync)
      query.reject(err)
    }
  }
`;
const PORTAL_SUSPENDED_PATCHED = `  async function PortalSuspended() {
    const q = query /* sponsorship-service: the connection may close, and forget q, while the callback runs */
    try {
      const x = await Promise.resolve(q.cursorFn(result))
      if (query !== q)
        return
      rows = 0
      x === CLOSE
        ? write(Close(q.portal))
        : (result = new Result(), write(Execute('', q.cursorRows)))
    } catch (err) {
      if (query !== q)
        return
      write(Sync)
      q.reject(err)
    }
  }
`;
// A reserve() waiting for a connection is queued in the pool (`queries`) and handed to a connect as `initial`. When
// that connect fails (the database is down), the reserve is rejected but stays queued: the next connection that
// closes is connected again for it, and once one opens the pool hands it to the rejected reserve, which nobody
// releases. Each such connection is lost; with all of them lost every later query waits for ever (seen here: a
// worker stuck after a database outage, and a pool of 6 hung within six cut-and-restore rounds). The patch takes the
// reserve out of the queue when it is rejected.
const RESERVE_QUERY = "        const query = { reserve: resolve, reject }\n";
const RESERVE_QUERY_PATCHED =
  "        const query = { reserve: resolve, reject: e => (queries.remove(query), reject(e)) } /* sponsorship-service: a rejected reserve leaves the queue */\n";
// The reserved handle: from `move(c, reserved)` to its `handler`. The first form is 3.4.9's; the second is what an
// earlier version of this script made of it (a release guard alone), replaced the same way.
const RESERVATION_BODY = `
    c.reserved.release = true

    const sql = Sql(handler)
    sql.release = () => {
      c.reserved = null
`;
const RESERVATION = [
  `    move(c, reserved)
    c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)${RESERVATION_BODY}      onopen(c)
    }

    return sql

    function handler(q) {
      c.queue === full
`,
  `    move(c, reserved)
    c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)${RESERVATION_BODY}      ${MARK}
      if (c.queue === closed || c.queue === connecting || c.queue === ended)
        return
      onopen(c)
    }

    return sql

    function handler(q) {
      c.queue === full
`,
];
// A statement sent on a reserved handle after release(), or on a transaction's after it ended (COMMIT or ROLLBACK),
// is the caller's mistake, not a lost connection: 3.4.9 ran it on the connection the pool had back (outside the
// transaction, beside another caller's); the patch rejects it, with its own code (RESERVATION_RELEASED,
// TRANSACTION_ENDED), so that it is not taken for a database outage (CONNECTION_CLOSED is one: a 503 and a retry).
const ENDED_ERROR = (code, message) => `Errors.generic('${code}', '${message}')`;
const RESERVATION_MARK = "/* sponsorship-service: a reservation ends with its connection */";
const RESERVATION_PATCHED = `    move(c, reserved)
    ${RESERVATION_MARK}
    const reservation = c.reserved = () => queue.length
      ? c.execute(queue.shift())
      : move(c, reserved)
    c.reserved.release = true
    // The pool calls onclose when the connection closes (it also sets c.reserved = null): what waits behind it fails.
    c.onclose = e => { while (queue.length) queue.shift().reject(e) }

    let released = false
    const sql = Sql(handler)
    sql.release = () => {
      released = true
      if (c.reserved !== reservation)
        return
      c.reserved = null
      c.onclose = null
      if (c.queue === closed || c.queue === connecting || c.queue === ended)
        return
      onopen(c)
    }

    return sql

    function handler(q) {
      if (c.reserved !== reservation)
        return q.reject(released ? ${ENDED_ERROR("RESERVATION_RELEASED", "a statement sent on a reserved connection after its release()")} : Errors.connection('CONNECTION_CLOSED', options))
      c.queue === full
`;
// A transaction (`sql.begin()`) holds its connection as reserve() does, and had the same fault: when the connection
// closed under it (a reset, the answer timeout), the caller was told at once, but the function the caller gave went
// on, and what it sent next ran on the connection the pool had reconnected for another query: outside any
// transaction, committed alone (its earlier statements rolled back with the old session), and its ROLLBACK or COMMIT
// too (db/driver.test.ts). Now a statement of a transaction whose connection closed is rejected with
// CONNECTION_CLOSED, the ones queued behind its full connection fail with it, and no ROLLBACK is sent for it (the
// server rolls back an open transaction when its session ends; a COMMIT already in flight may have been applied, so a
// caller told of the close treats the outcome as unknown, as with any lost connection). The caller is told why the
// connection closed (ANSWER_TIMEOUT when the server fell silent: CLOSED_REASON below).
const BEGIN_MARK = "/* sponsorship-service: a transaction ends with its connection */";
const BEGIN_STATE = "    let savepoints = 0\n      , connection\n      , prepare = null\n";
const BEGIN_STATE_PATCHED = `    let savepoints = 0
      , connection
      , prepare = null
      , lost = false
      , closeHandler = null
      , poolOptions = sql.options
      , reservation ${BEGIN_MARK}
`;
const BEGIN_RACE = "        new Promise((_, reject) => connection.onclose = reject)\n";
const BEGIN_RACE_PATCHED =
  "        new Promise((_, reject) => connection.onclose = closeHandler = e => { lost = true; while (queries.length) queries.shift().reject(e); reject(e) })\n";
// The transaction's close handler also leaves the connection when the transaction ends (3.4.9 left it there: a later
// close of the pooled connection, its max_lifetime or an outage, called the ended transaction's handler), and a
// statement still queued behind the connection then is rejected as sent after the end, never left waiting.
const BEGIN_CATCH = "    } catch (error) {\n      throw error\n    }\n\n    async function scope(c, fn, name) {\n";
const BEGIN_CATCH_PATCHED = `    } catch (error) {
      throw error
    } finally { /* sponsorship-service: the transaction's close handler leaves its connection with it */
      connection && connection.onclose === closeHandler && (connection.onclose = null)
      while (queries.length)
        queries.shift().reject(${ENDED_ERROR("TRANSACTION_ENDED", "a statement sent on a transaction after it ended")})
    }

    async function scope(c, fn, name) {
`;
const BEGIN_ROLLBACK = "      } catch (e) {\n        await (name\n";
const BEGIN_ROLLBACK_PATCHED = "      } catch (e) {\n        c.reserved === reservation && await (name\n";
const BEGIN_HANDLER = "        q.catch(e => uncaughtError || (uncaughtError = e))\n        c.queue === full\n";
const BEGIN_HANDLER_PATCHED = `        q.catch(e => uncaughtError || (uncaughtError = e))
        if (c.reserved !== reservation)
          return q.reject(lost ? Errors.connection('CONNECTION_CLOSED', poolOptions) : ${ENDED_ERROR("TRANSACTION_ENDED", "a statement sent on a transaction after it ended")})
        c.queue === full
`;
const BEGIN_ONEXECUTE = "      move(c, reserved)\n      c.reserved = () => queries.length\n";
const BEGIN_ONEXECUTE_PATCHED = "      move(c, reserved)\n      reservation = c.reserved = () => queries.length\n";

// onclose: the next query waiting is handed to the reconnect; a reserve also stays queued (see above).
const ONCLOSE = "    queries.length && connect(c, queries.shift())\n  }\n}\n";
const ONCLOSE_PATCHED = `    /* sponsorship-service: a reserve handed to the reconnect stays queued: served once the connection is open */
    if (queries.length) {
      const next = queries.shift()
      next.reserve && queries.push(next)
      connect(c, next)
    }
  }
}
`;

// A statement the server never answers: a partition or a frozen server, where no reset ever comes. TCP retransmits for
// about 15 minutes before it gives a connection up, and postgres.js has no bound of its own on a statement in flight,
// so a request handler waited that long for its answer (the web server's statement_timeout is the server's, which
// never hears of it). The patch adds the option `answer_timeout` (seconds; db/client.ts `answerTimeoutMs`): a
// connection on which a statement waits, and on which the server has sent nothing for that long, is destroyed, and
// what waited on it fails with ANSWER_TIMEOUT; the pool opens a new one for the next statement. The clock starts when a
// statement is given to an idle connection (so the time to send a large one counts) and again at every byte received;
// the server must still be silent at a second look, after the sockets were read (a stalled event loop is not the
// server's silence). COPY and cursors (which wait for their caller between batches) are not timed.
const ANSWER_MARK = "/* sponsorship-service: a statement the server never answers (answer_timeout) */";
const ANSWER_STATE = "      , connectTimer = timer(connectTimedOut, options.connect_timeout)\n";
const ANSWER_STATE_PATCHED = `      , connectTimer = timer(connectTimedOut, options.connect_timeout)
      ${ANSWER_MARK}
      , answerTimeout = (options.answer_timeout || 0) * 1000

  let answerTimer = null
    , heardAt = 0
`;
const ANSWER_EXECUTE = "    try {\n      q.state = backend\n      query\n";
const ANSWER_EXECUTE_PATCHED = "    try {\n      q.state = backend\n      answerTimeout && awaitAnswer(!query)\n      query\n";
const ANSWER_DATA = "  function data(x) {\n    if (incomings) {\n";
const ANSWER_DATA_PATCHED = "  function data(x) {\n    answerTimeout && (heardAt = performance.now())\n    if (incomings) {\n";
const ANSWER_FUNCTIONS = `  function connectTimedOut() {
    errored(Errors.connection('CONNECT_TIMEOUT', options, socket))
    socket.destroy()
  }
`;
const ANSWER_FUNCTIONS_PATCHED = `${ANSWER_FUNCTIONS}
  ${ANSWER_MARK}
  function awaitAnswer(fromIdle) {
    fromIdle && (heardAt = performance.now())
    answerTimer === null && (answerTimer = answerAfter(answerTimeout))
  }

  function answerAfter(ms, again) {
    const x = setTimeout(answerCheck, ms, again)
    x.unref && x.unref()
    return x
  }

  function answerCheck(again) {
    answerTimer = null
    if (!socket || stream || !(query || sent.length) || (query && query.cursorFn))
      return
    const silent = performance.now() - heardAt
    if (silent < answerTimeout)
      return answerTimer = answerAfter(answerTimeout - silent)
    // Timers run before sockets are read: after a stalled event loop the answer may be waiting unread. A timer set now
    // runs in the next turn of the loop, after its sockets were read.
    if (!again)
      return answerTimer = answerAfter(0, true)
    const x = socket
      , e = Errors.connection('ANSWER_TIMEOUT', options, socket)
    error(e)
    closed(true, e) // now, not at the socket's 'close': the pool must not hand the connection out in between
    x.destroy()
  }
`;
const ANSWER_CLOSED = "    idleTimer.cancel()\n    lifeTimer.cancel()\n    connectTimer.cancel()\n";
const ANSWER_CLOSED_PATCHED = `${ANSWER_CLOSED}    answerTimer !== null && (clearTimeout(answerTimer), answerTimer = null)\n`;
const ANSWER_TERMINATE = "  function terminate() {\n    terminated = true\n";
const ANSWER_TERMINATE_PATCHED = `${ANSWER_TERMINATE}    answerTimer !== null && (clearTimeout(answerTimer), answerTimer = null)\n`;
const ANSWER_OPTION = "    target_session_attrs: null\n  }\n";
const ANSWER_OPTION_PATCHED = `    target_session_attrs: null,\n    answer_timeout  : null ${ANSWER_MARK}\n  }\n`;
const ANSWER_INTS = "'backoff', 'keep_alive']";
const ANSWER_INTS_PATCHED = "'backoff', 'keep_alive', 'answer_timeout']";

// An end() called while a statement is in flight waits for the connection to finish (`ended`), which only
// ReadyForQuery or terminate() told it: a connection that failed (a reset, the answer timeout) rejects its statement
// on the socket's 'error' and closes a moment later, and that close told no one. A caller that ended its pool as soon
// as its statement failed (a process stopping after its database went first) waited out end()'s timeout, or for ever
// without one. Now the close tells it, unless the pool reconnects the connection at once for a statement waiting in
// its queue (`onclose`): that one is served first (an end is graceful), and the connection ends after it.
const CLOSED_ENDS = "    onclose(connection, Errors.connection('CONNECTION_CLOSED', options, socket))\n  }\n";
const CLOSED_ENDS_PATCHED = `    onclose(connection, reason || Errors.connection('CONNECTION_CLOSED', options, socket))
    !initial && ended && (ended(), ending = ended = null) /* sponsorship-service: an end() waiting for this connection is done */
  }
`;
// Why the connection closed, for what held it (a transaction, a reservation): closed() is told when it knows better
// than CONNECTION_CLOSED (the answer timeout).
const CLOSED_REASON = "  async function closed(hadError) {\n";
const CLOSED_REASON_PATCHED = "  async function closed(hadError, reason) { /* sponsorship-service: why, when known */\n";

// What an earlier form of this script (ba03833, never released) wrote where this one writes something else. Each is
// turned back into the text it replaced before the edits above apply, so a tree that form patched ends as a pristine
// one does (npm does not unpack an installed package again).
const SUPERSEDED_CONNECTION = [
  // The form of 389475b to baa620f: the server's error sent before the close was dropped for CONNECTION_CLOSED.
  [CLOSED_REJECT_PATCHED.replace("      const refusal = errorResponse\n", "").replace("refusal || ", ""), CLOSED_REJECT[0]],
  // The form of 52b69be to 3efbb70: a close during the startup reconnected at once, for ever.
  [
    CLOSED_REJECT_PATCHED.replace("      const refusal = errorResponse\n", "").replace(
      "      if (options.host.length > 1)\n        return reconnect()\n      /* sponsorship-service: closed during the startup without an error: a failed connect, as a refusal */\n      queryError(initial, refusal || Errors.connection('CONNECTION_CLOSED', options))\n      initial = null\n      hadError = true\n",
      "      return reconnect()\n",
    ),
    CLOSED_REJECT[0],
  ],
  [
    `${ANSWER_FUNCTIONS}
  ${ANSWER_MARK}
  function awaitAnswer(fromIdle) {
    fromIdle && (heardAt = performance.now())
    answerTimer === null && (answerTimer = answerAfter(answerTimeout))
  }

  function answerAfter(ms) {
    const x = setTimeout(answerCheck, ms)
    x.unref && x.unref()
    return x
  }

  function answerCheck() {
    answerTimer = null
    if (!socket || stream || !(query || sent.length))
      return
    const silent = performance.now() - heardAt
    if (silent < answerTimeout)
      return answerTimer = answerAfter(answerTimeout - silent)
    const x = socket
    error(Errors.connection('ANSWER_TIMEOUT', options, socket))
    closed(true) // now, not at the socket's 'close': the pool must not hand the connection out in between
    x.destroy()
  }
`,
    ANSWER_FUNCTIONS,
  ],
  [
    "    ended && (ended(), ending = ended = null) /* sponsorship-service: an end() waiting for this connection is done */\n    closedTime = performance.now()\n",
    "    closedTime = performance.now()\n",
  ],
  // The form of 5698e66 to c82db2b: the answer timeout and the close did not pass on why the connection closed.
  [
    ANSWER_FUNCTIONS_PATCHED.replace(
      "    const x = socket\n      , e = Errors.connection('ANSWER_TIMEOUT', options, socket)\n    error(e)\n    closed(true, e)",
      "    const x = socket\n    error(Errors.connection('ANSWER_TIMEOUT', options, socket))\n    closed(true)",
    ),
    ANSWER_FUNCTIONS,
  ],
  [CLOSED_ENDS_PATCHED.replace("reason || ", ""), CLOSED_ENDS],
];

// Forms of index.js an earlier version of this script wrote, turned back to 3.4.9's text before the edits apply.
const SUPERSEDED_INDEX = [
  // The form of 52b69be to 3efbb70: a statement after release() or after its transaction ended was rejected as
  // CONNECTION_CLOSED, as if the connection had been lost.
  [
    RESERVATION_PATCHED.replace("    let released = false\n", "")
      .replace("      released = true\n", "")
      .replace(
        `released ? ${ENDED_ERROR("RESERVATION_RELEASED", "a statement sent on a reserved connection after its release()")} : Errors.connection('CONNECTION_CLOSED', options)`,
        "Errors.connection('CONNECTION_CLOSED', options)",
      ),
    RESERVATION[0],
  ],
  [`    let savepoints = 0\n      , connection\n      , prepare = null\n      , reservation ${BEGIN_MARK}\n`, BEGIN_STATE],
  ["        new Promise((_, reject) => connection.onclose = e => { while (queries.length) queries.shift().reject(e); reject(e) })\n", BEGIN_RACE],
  [
    "        q.catch(e => uncaughtError || (uncaughtError = e))\n        if (c.reserved !== reservation)\n          return q.reject(Errors.connection('CONNECTION_CLOSED', options))\n        c.queue === full\n",
    BEGIN_HANDLER,
  ],
  // The form of 8f53014 to ad7752e: the ended transaction's close handler stayed on its connection, and the error of
  // a lost one named no host (the begin's own options).
  [`    let savepoints = 0\n      , connection\n      , prepare = null\n      , lost = false\n      , reservation ${BEGIN_MARK}\n`, BEGIN_STATE],
  ["        new Promise((_, reject) => connection.onclose = e => { lost = true; while (queries.length) queries.shift().reject(e); reject(e) })\n", BEGIN_RACE],
  [BEGIN_HANDLER_PATCHED.replace("'CONNECTION_CLOSED', poolOptions)", "'CONNECTION_CLOSED', options)"), BEGIN_HANDLER],
];

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
 * Applies `edits` ([original, patched] pairs; `original` may be a list of the forms it may have) to `file`: each
 * edit whose patched text is not there yet, when one of its original texts is; returns what it did ("NOT patched" when an edit finds neither).
 * `superseded` ([earlier patched text, its original] pairs) is turned back first.
 */
function patchFile(file, edits, superseded = []) {
  const before = readFileSync(file, "utf8");
  let text = before;
  for (const [old, original] of superseded) text = text.replace(old, original);
  const pending = edits.filter(([, patched]) => !text.includes(patched));
  if (pending.length === 0) {
    if (text === before) return "already patched";
    writeFileSync(file, text);
    return "patched";
  }
  const found = pending.map(([originals, patched]) => [[originals].flat().find((o) => text.includes(o)), patched]);
  if (!found.every(([original]) => original !== undefined)) return "NOT patched";
  for (const [original, patched] of found) text = text.replace(original, patched);
  writeFileSync(file, text);
  return "patched";
}

export function patchPostgres() {
  const dir = packageDir();
  const version = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version;
  const results = [];
  for (const variant of ["src", "cjs/src", "cf/src"]) {
    if (!existsSync(path.join(dir, variant, "connection.js"))) continue;
    const connection = patchFile(
      path.join(dir, variant, "connection.js"),
      [
        [NEXT_WRITE, NEXT_WRITE_PATCHED],
        [CLOSED, CLOSED_PATCHED],
        [TERMINATE, TERMINATE_PATCHED],
        [CLOSED_REJECT, CLOSED_REJECT_PATCHED],
        [FETCH_TYPES, FETCH_TYPES_PATCHED],
        [PORTAL_SUSPENDED, PORTAL_SUSPENDED_PATCHED],
        [ANSWER_STATE, ANSWER_STATE_PATCHED],
        [ANSWER_EXECUTE, ANSWER_EXECUTE_PATCHED],
        [ANSWER_DATA, ANSWER_DATA_PATCHED],
        [ANSWER_FUNCTIONS, ANSWER_FUNCTIONS_PATCHED],
        [ANSWER_CLOSED, ANSWER_CLOSED_PATCHED],
        [ANSWER_TERMINATE, ANSWER_TERMINATE_PATCHED],
        [CLOSED_ENDS, CLOSED_ENDS_PATCHED],
        [CLOSED_REASON, CLOSED_REASON_PATCHED],
      ],
      SUPERSEDED_CONNECTION,
    );
    const index = patchFile(
      path.join(dir, variant, "index.js"),
      [
        [RESERVATION, RESERVATION_PATCHED],
        [RESERVE_QUERY, RESERVE_QUERY_PATCHED],
        [ONCLOSE, ONCLOSE_PATCHED],
        [ANSWER_OPTION, ANSWER_OPTION_PATCHED],
        [ANSWER_INTS, ANSWER_INTS_PATCHED],
        [BEGIN_STATE, BEGIN_STATE_PATCHED],
        [BEGIN_RACE, BEGIN_RACE_PATCHED],
        [BEGIN_ROLLBACK, BEGIN_ROLLBACK_PATCHED],
        [BEGIN_HANDLER, BEGIN_HANDLER_PATCHED],
        [BEGIN_ONEXECUTE, BEGIN_ONEXECUTE_PATCHED],
        [BEGIN_CATCH, BEGIN_CATCH_PATCHED],
      ],
      SUPERSEDED_INDEX,
    );
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
  // Not patched is a failed install: the service would run with a driver that a dropped connection can crash, and
  // without the answer timeout it relies on. package.json pins the version the patch knows.
  if (results.some((r) => r.includes("NOT patched"))) {
    console.error(`ERROR ${line}`);
    process.exitCode = 1;
  } else console.log(line);
}
