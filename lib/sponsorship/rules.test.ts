import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CREATION_RULES, OTHER_RULES } from "./rules";

const ROOT = path.resolve(import.meta.dirname, "../..");

describe("the map of the sponsorship rules", () => {
  it("lists creation's checks in the order of decisions.md, replay included by name", () => {
    const order = [
      "pause",
      "administrator IP block",
      "global budget",
      "IP block / limit",
      "wallet registered",
      "replay",
      "wallet block / limit",
      "open request",
      "already sponsored",
    ];
    const names = CREATION_RULES.map((r) => r.rule).filter((name) => order.includes(name));
    expect(names).toEqual(order);
  });

  it("points only to files that exist, and to SQL blocks the functions' sources it names really have", () => {
    for (const rule of [...CREATION_RULES, ...OTHER_RULES]) {
      const files = rule.where.match(/[\w./-]+\.(?:ts|sql)/g) ?? [];
      for (const file of files) expect(existsSync(path.join(ROOT, file)), `${rule.rule}: ${file}`).toBe(true);
      const sql = files
        .filter((file) => file.endsWith(".sql"))
        .map((file) => readFileSync(path.join(ROOT, file), "utf8"))
        .join("\n");
      for (const [, block] of rule.where.matchAll(/\(-- ([^)]+)\)/g)) expect(sql, `${rule.rule}: -- ${block}`).toContain(`-- ${block}`);
    }
  });
});
