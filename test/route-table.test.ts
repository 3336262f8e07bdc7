import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { resolveRoute } from "./api-client";
import { findRouteFolders, GENERATED_FILE, renderRouteTable } from "./route-table";

describe("the test client's route table", () => {
  it("is generated from the current route tree (run `npm run test:routes` when this fails)", () => {
    expect(readFileSync(GENERATED_FILE, "utf8")).toBe(renderRouteTable());
  });

  it("covers every route.ts under app/(api), the admin routes included", () => {
    const table = renderRouteTable();
    const folders = findRouteFolders();
    expect(folders.some((f) => f[0] === "admin")).toBe(true);
    for (const folder of folders) expect(table).toContain(`import("@/app/(api)/${[...folder, "route"].join("/")}")`);
  });

  it("routes a static segment before a dynamic one and anything else to the catch-all, as Next does", async () => {
    const register = await import("@/app/(api)/wallets/register/route");
    const wallet = await import("@/app/(api)/wallets/[address]/route");
    const catchAll = await import("@/app/(api)/[...path]/route");
    expect((await resolveRoute("/wallets/register")).module.POST).toBe(register.POST);
    const byAddress = await resolveRoute("/wallets/0xAbC");
    expect(byAddress.module.GET).toBe(wallet.GET);
    expect(byAddress.params).toEqual({ address: "0xAbC" });
    const block = await resolveRoute("/admin/wallets/0xabc/block");
    expect(block.params).toEqual({ address: "0xabc" });
    const nowhere = await resolveRoute("/no/such/path");
    expect(nowhere.module.GET).toBe(catchAll.GET);
    expect(nowhere.params).toEqual({ path: ["no", "such", "path"] });
    expect((await resolveRoute("/")).params).toEqual({ path: [] });
  });
});
