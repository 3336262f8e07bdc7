import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { constants } from "node:buffer";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { fullDiskFile } from "@/test/full-disk";
import { restoreGoodState, stateSaved } from "./anvil";
import { compactDump, isWholeDump } from "./state-dump";

/**
 * The local chain's state dump, read as bytes (contracts/state-dump.ts). Compaction keeps the last blocks and their
 * transactions and every other member byte for byte; a dump cut short is corrupt; one longer than V8's longest string
 * (a chain run for 3-4 days at 1-s blocks) is kept, where reading it as text took it for corrupt, moved it aside and
 * began the chain afresh.
 */

const dir = mkdtempSync(path.join(tmpdir(), "state-dump-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function dump(blocks: number, extra: Record<string, unknown> = {}) {
  return {
    block: { number: `0x${blocks.toString(16)}`, timestamp: "0x1" },
    accounts: { "0x00000000000000000000000000000000000000aa": { nonce: 1, balance: "0x10", code: "0x", storage: { "0x0": "0x1" } } },
    best_block_number: blocks,
    blocks: Array.from({ length: blocks }, (_, i) => ({ header: { number: `0x${(i + 1).toString(16)}`, note: 'a "quoted" } ] brace' } })),
    transactions: Array.from({ length: blocks }, (_, i) => ({ block_number: i + 1, info: { hash: `0x${i}` } })),
    ...extra,
  };
}

describe("compactDump", () => {
  it("keeps the last blocks and their transactions, every other member unchanged, written whole", () => {
    const file = path.join(dir, "state.json");
    const original = dump(20, { historical_states: null, 'odd key \\ with "quotes"': [1, { a: "}" }] });
    writeFileSync(file, JSON.stringify(original, null, 1));
    expect(compactDump(file, 5)).toBe("compacted");
    const compacted = JSON.parse(readFileSync(file, "utf8")) as ReturnType<typeof dump>;
    expect(compacted.blocks.map((b) => Number.parseInt(b.header.number, 16))).toEqual([16, 17, 18, 19, 20]);
    expect(compacted.transactions.map((t) => t.block_number)).toEqual([16, 17, 18, 19, 20]);
    expect({ ...compacted, blocks: [], transactions: [] }).toEqual({ ...original, blocks: [], transactions: [] });
    expect(compactDump(file, 5)).toBe("kept");
  });

  it("finds corrupt a dump cut short, and one whose blocks, head or keys are not JSON, and leaves it for the caller to move aside (prepareStateFile)", () => {
    for (const [name, text] of [
      ["cut", JSON.stringify(dump(3)).slice(0, -40)],
      ["nested-brace", '{"block":{"number":"0x1"}'],
      ["empty", ""],
      ["bad-block", '{"best_block_number":3,"blocks":[oops,{},{}],"transactions":[]}'],
      // Bytes overwritten rather than cut: a head or a key that is no JSON threw past the scanner, at every start.
      ["bad-head", '{"best_block_number":1x,"blocks":[{},{}]}'],
      ["bad-key", '{"a\u0001":1,"best_block_number":1,"blocks":[{},{}]}'],
    ] as const) {
      const file = path.join(dir, `${name}.json`);
      writeFileSync(file, text);
      expect(compactDump(file, 1), name).toBe("corrupt");
      expect(readFileSync(file, "utf8")).toBe(text);
    }
  });

  it("puts the last good state in place only once its copy is whole: a copy that fails (a full disk) leaves the state file where it was", async () => {
    const file = path.join(dir, "restore.json");
    writeFileSync(file, "cut sh");
    writeFileSync(`${file}.good`, JSON.stringify(dump(2)));
    const tmp = await fullDiskFile(`${file}.restoring.${process.pid}.tmp`);
    // Before: moved aside first, then copied: the failure left no state file, which the next start took for a reset.
    expect(() => restoreGoodState(file, `${file}.corrupt`)).toThrow();
    expect(readFileSync(file, "utf8")).toBe("cut sh");
    expect(existsSync(tmp)).toBe(false);
    expect(restoreGoodState(file, `${file}.corrupt`)).toBe(true);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual(dump(2));
    expect(readFileSync(`${file}.corrupt`, "utf8")).toBe("cut sh");
  });

  it("keeps a whole dump longer than V8's longest string (it was taken for corrupt and the chain begun afresh)", () => {
    const file = path.join(dir, "large.json");
    const head = Buffer.from('{"best_block_number":1,"blocks":[{"header":{"number":"0x1"}}],"transactions":[],"pad":"');
    const tail = Buffer.from('"}\n');
    const fd = openSync(file, "w");
    try {
      writeSync(fd, head);
      const chunk = Buffer.alloc(64 * 1024 * 1024, "x");
      let written = 0;
      while (written < constants.MAX_STRING_LENGTH) written += writeSync(fd, chunk);
      writeSync(fd, tail);
    } finally {
      closeSync(fd);
    }
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(constants.MAX_STRING_LENGTH);
    expect(() => readFileSync(file, "utf8")).toThrow();
    expect(isWholeDump(file)).toBe(true);
    expect(stateSaved(file, 0)).toBe("saved");
    expect(compactDump(file, 10)).toBe("kept");
    expect(statSync(file).size).toBe(size);
    rmSync(file);
  }, 120_000);
});
