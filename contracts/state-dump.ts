import { constants } from "node:buffer";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { writeFileDurably } from "@/lib/durable-file";

/**
 * An anvil state dump (`--state`), read as bytes. A dump grows with the chain (every block header is kept, about
 * 150 MB a day at 1-s blocks) and past V8's longest string (512 MiB) it could not be read as text at all: read with
 * `readFileSync(file, "utf8")`, a valid dump of 3-4 days was taken for a corrupt one, moved aside and the chain
 * begun afresh. It is read in pieces into one Buffer (readFileSync refuses 2 GiB and more); one larger than a Buffer
 * is kept unchecked, for anvil to judge. Here the dump is scanned as a Buffer: its top-level members are located, and only its blocks and
 * transactions, each small, are parsed one by one; the rest (accounts, storage) is copied as it is.
 */

type Span = { start: number; end: number };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

function isSpace(c: number | undefined): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(buf: Buffer, i: number): number {
  while (i < buf.length && isSpace(buf[i])) i++;
  return i;
}

/** The index after the string starting at `i` (a quote), or -1 when it does not end. */
function skipString(buf: Buffer, i: number): number {
  for (i++; i < buf.length; i++) {
    const c = buf[i];
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i + 1;
  }
  return -1;
}

/** The index after the JSON value starting at `i`, or -1 when it is cut short (its nesting is checked, not its grammar). */
function skipValue(buf: Buffer, i: number): number {
  const first = buf[i];
  if (first === QUOTE) return skipString(buf, i);
  if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
    let depth = 0;
    while (i < buf.length) {
      const c = buf[i];
      if (c === QUOTE) {
        i = skipString(buf, i);
        if (i < 0) return -1;
        continue;
      }
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    return -1;
  }
  // A number, true, false or null: up to the next delimiter.
  const start = i;
  while (i < buf.length && buf[i] !== COMMA && buf[i] !== CLOSE_OBJECT && buf[i] !== CLOSE_ARRAY && !isSpace(buf[i])) i++;
  return i > start ? i : -1;
}

/** The spans of a top-level object's member values by key; undefined when `buf` is no whole object (cut short, empty). */
export function topLevelMembers(buf: Buffer): Map<string, Span> | undefined {
  let i = skipSpace(buf, 0);
  if (buf[i] !== OPEN_OBJECT) return undefined;
  const members = new Map<string, Span>();
  i = skipSpace(buf, i + 1);
  if (buf[i] === CLOSE_OBJECT) return skipSpace(buf, i + 1) === buf.length ? members : undefined;
  for (;;) {
    if (buf[i] !== QUOTE) return undefined;
    const keyEnd = skipString(buf, i);
    if (keyEnd < 0) return undefined;
    const key = JSON.parse(buf.toString("utf8", i, keyEnd)) as string;
    i = skipSpace(buf, keyEnd);
    if (buf[i] !== COLON) return undefined;
    const start = skipSpace(buf, i + 1);
    const end = skipValue(buf, start);
    if (end < 0) return undefined;
    members.set(key, { start, end });
    i = skipSpace(buf, end);
    if (buf[i] === COMMA) {
      i = skipSpace(buf, i + 1);
      continue;
    }
    if (buf[i] !== CLOSE_OBJECT) return undefined;
    return skipSpace(buf, i + 1) === buf.length ? members : undefined;
  }
}

/** The spans of the elements of the array at `span`; undefined when it is no array. */
function arrayElements(buf: Buffer, span: Span): Span[] | undefined {
  if (buf[span.start] !== OPEN_ARRAY) return undefined;
  const elements: Span[] = [];
  let i = skipSpace(buf, span.start + 1);
  if (buf[i] === CLOSE_ARRAY) return elements;
  for (;;) {
    const end = skipValue(buf, i);
    if (end < 0) return undefined;
    elements.push({ start: i, end });
    i = skipSpace(buf, end);
    if (buf[i] === COMMA) i = skipSpace(buf, i + 1);
    else return buf[i] === CLOSE_ARRAY ? elements : undefined;
  }
}

function parse<T>(buf: Buffer, span: Span): T {
  return JSON.parse(buf.toString("utf8", span.start, span.end)) as T;
}

/**
 * The whole file as one Buffer, read in pieces: readFileSync refuses a file over 2 GiB (ERR_FS_FILE_TOO_LARGE), two
 * weeks of 1-s blocks without a restart. Undefined when it is larger than a Buffer can be (about 4 GiB here).
 */
function readWhole(file: string): Buffer | undefined {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    if (size > constants.MAX_LENGTH) return undefined;
    const buf = Buffer.allocUnsafe(size);
    for (let done = 0; done < size;) {
      const read = readSync(fd, buf, done, Math.min(size - done, 1 << 30), done);
      if (read === 0) return buf.subarray(0, done); // shrank meanwhile
      done += read;
    }
    return buf;
  } finally {
    closeSync(fd);
  }
}

/** Whether `file` holds a whole dump (a top-level object, not cut short); false when it cannot be read. */
export function isWholeDump(file: string): boolean {
  try {
    const buf = readWhole(file);
    // Too large to hold: whole as far as this can tell (anvil is left to judge it).
    return buf === undefined || topLevelMembers(buf) !== undefined;
  } catch {
    return false;
  }
}

/**
 * Drops the blocks (and their transactions) older than the last `keepBlocks` from the dump in `file`, written whole
 * (writeFileDurably). A "corrupt" file is left where it is, for the caller to move aside. "corrupt": no whole dump (a crash while anvil wrote it); "kept":
 * nothing to drop, or a dump whose blocks this cannot read (anvil is left to judge it); "compacted".
 */
export function compactDump(file: string, keepBlocks: number): "kept" | "compacted" | "corrupt" {
  // A read that fails (EIO, ENOMEM) says nothing of the file: it is kept, for anvil to judge.
  let buf: Buffer | undefined;
  try {
    buf = readWhole(file);
  } catch {
    return "kept";
  }
  if (buf === undefined) return "kept";
  let members: Map<string, Span> | undefined;
  let best: unknown;
  try {
    members = topLevelMembers(buf);
    const bestSpan = members?.get("best_block_number");
    best = bestSpan ? parse<unknown>(buf, bestSpan) : undefined;
  } catch {
    // A key or the head that is not JSON (bytes overwritten, not cut): no dump anvil wrote whole.
    return "corrupt";
  }
  if (!members) return "corrupt";
  const blocksSpan = members.get("blocks");
  if (best === undefined || !blocksSpan) return "kept";
  const blocks = arrayElements(buf, blocksSpan);
  if (typeof best !== "number" || !blocks || blocks.length <= keepBlocks) return "kept";
  const oldest = best - keepBlocks + 1;
  const replaced: { span: Span; elements: Span[] }[] = [];
  try {
    replaced.push({
      span: blocksSpan,
      elements: blocks.filter((b) => Number.parseInt(parse<{ header?: { number?: string } }>(buf, b).header?.number ?? "0x0", 16) >= oldest),
    });
    const txSpan = members.get("transactions");
    const transactions = txSpan ? arrayElements(buf, txSpan) : undefined;
    if (txSpan && transactions) {
      replaced.push({ span: txSpan, elements: transactions.filter((t) => (parse<{ block_number?: number }>(buf, t).block_number ?? 0) >= oldest) });
    }
  } catch {
    // A block or a transaction that is not JSON: not a dump anvil wrote whole.
    return "corrupt";
  }
  replaced.sort((a, b) => a.span.start - b.span.start);
  const bytes = buf;
  // The original bytes, but for the two arrays' kept elements (slices of the one Buffer: nothing copied).
  function* chunks(): Generator<Buffer | string> {
    let at = 0;
    for (const { span, elements } of replaced) {
      yield bytes.subarray(at, span.start);
      yield "[";
      for (const [n, e] of elements.entries()) {
        if (n > 0) yield ",";
        yield bytes.subarray(e.start, e.end);
      }
      yield "]";
      at = span.end;
    }
    yield bytes.subarray(at);
  }
  writeFileDurably(file, chunks(), 0o600);
  return "compacted";
}
