import path from "node:path";
import { ESLint } from "eslint";
import { beforeAll, describe, expect, it } from "vitest";

/**
 * The guard rails of eslint.config.mjs catch what they are there for: deliberate violations, linted through
 * ESLint's Node API as if they were files of the tree (virtual paths: nothing is written, and `npm run lint` never
 * sees them), fail with the rule that holds the line; the same code where it is allowed passes.
 */

const eslint = new ESLint({ cwd: path.resolve(import.meta.dirname, "..") });

// The first lint loads the whole configuration (Next's rules, the TypeScript parser): a while on a busy machine.
beforeAll(() => eslint.lintText("", { filePath: "lib/warm-up.ts" }), 120_000);

async function rulesBroken(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return (result?.messages ?? []).filter((m) => m.severity === 2).map((m) => m.ruleId ?? m.message);
}

describe("the lint rules that hold the layout", () => {
  it("refuse an import of app/, test/ or vitest from lib/ or db/", async () => {
    expect(await rulesBroken("lib/sponsorship/fixture-violation.ts", 'export { GET } from "@/app/(api)/health/route";\n')).toContain("no-restricted-imports");
    expect(await rulesBroken("lib/http/fixture-violation.ts", 'import { GET } from "../../app/(api)/health/route";\nexport const get = GET;\n')).toContain(
      "no-restricted-imports",
    );
    expect(
      await rulesBroken("db/queries/fixture-violation.ts", 'import { createTestDatabase } from "@/test/db";\nexport const make = createTestDatabase;\n'),
    ).toContain("no-restricted-imports");
    expect(await rulesBroken("db/fixture-violation.ts", 'import { expect } from "vitest";\nexport const check = expect;\n')).toContain("no-restricted-imports");
  });

  it("let tests beside the code import vitest and test/, and app/ import lib/", async () => {
    expect(
      await rulesBroken(
        "lib/http/fixture.test.ts",
        'import { expect } from "vitest";\nimport { createTestDatabase } from "@/test/db";\nexpect(createTestDatabase).toBeDefined();\n',
      ),
    ).toEqual([]);
    expect(await rulesBroken("app/(api)/fixture/route.ts", 'export { defineRoute } from "@/lib/http/route";\n')).toEqual([]);
  });

  it('refuse an import of db/ or lib/config from a "use client" component, and allow it in a server component', async () => {
    const client = (source: string) => `"use client";\n\nimport * as m from "${source}";\n\nexport const M = m;\n`;
    const rule = "boundaries-local/no-server-imports-in-client-components";
    expect(await rulesBroken("app/(web)/request/_components/fixture.tsx", client("@/db/schema"))).toContain(rule);
    expect(await rulesBroken("app/(web)/request/_components/fixture.tsx", client("@/lib/config"))).toContain(rule);
    expect(await rulesBroken("app/(web)/request/_components/fixture.tsx", client("../../../../db/queries/wallets"))).toContain(rule);
    expect(await rulesBroken("app/(web)/request/_components/fixture.tsx", client("@/lib/sponsorship/schemas"))).toEqual([]);
    expect(await rulesBroken("app/(web)/dashboard/fixture.tsx", 'import * as m from "@/db/schema";\n\nexport const M = m;\n')).toEqual([]);
  });

  it("refuse a Drizzle DELETE or UPDATE without WHERE in shipped code", async () => {
    const header = 'import { eq } from "drizzle-orm";\nimport type { Database } from "@/db/client";\nimport { wallets } from "@/db/schema";\n';
    expect(await rulesBroken("db/queries/fixture.ts", `${header}export const wipe = (db: Database) => db.delete(wallets);\n`)).toContain(
      "drizzle/enforce-delete-with-where",
    );
    expect(
      await rulesBroken("db/queries/fixture.ts", `${header}export const all = (db: Database) => db.update(wallets).set({ sponsorshipCount: 0 });\n`),
    ).toContain("drizzle/enforce-update-with-where");
    expect(
      await rulesBroken(
        "db/queries/fixture.ts",
        `${header}export const one = (db: Database, id: string) => db.update(wallets).set({ sponsorshipCount: 0 }).where(eq(wallets.id, id));\n`,
      ),
    ).toEqual([]);
    expect(
      await rulesBroken("db/queries/fixture.ts", `${header}export const one = (db: Database, id: string) => db.delete(wallets).where(eq(wallets.id, id));\n`),
    ).toEqual([]);
  });
});
