import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { insertAdminAction, listAdminActions } from "@/db/queries/admin";
import { signedInAdministrator } from "@/test/admin";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { readServiceState } from "@/db/queries/controls";
import { blockIpAsAdministrator, pauseSponsorships, resumeSponsorships, unblockIpAsAdministrator } from "./controls";

/** The operator's brakes (decisions.md, "On the open internet"): each change audited with it, in one transaction. */

const ADMIN_TOKEN = "controls-test-admin-token-0123456789abcdefgh";
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

const context = () => signedInAdministrator(t.db, ADMIN_TOKEN);

describe("operator controls", () => {
  it("pauses with a reason and resumes, each audited once; a second pause changes nothing", async () => {
    const c = await context();
    await expect(pauseSponsorships(t.db, c, { reason: "  " })).rejects.toMatchObject({ code: "invalid_value" });
    // NUL, which PostgreSQL text cannot hold: before, the insert failed and the route answered 500.
    await expect(pauseSponsorships(t.db, c, { reason: "a\u0000b" })).rejects.toMatchObject({ code: "invalid_value" });
    await expect(blockIpAsAdministrator(t.db, c, { cidr: "198.51.100.0/24", reason: "a\u0000b" })).rejects.toMatchObject({ code: "invalid_value" });
    expect((await pauseSponsorships(t.db, c, { reason: "fee spike" })).changed).toBe(true);
    expect((await pauseSponsorships(t.db, c, { reason: "again" })).changed).toBe(false);
    expect(await readServiceState(t.db)).toMatchObject({ paused: true, pauseReason: "fee spike", pausedBy: `admin:${c.session.id}` });
    expect((await resumeSponsorships(t.db, c)).changed).toBe(true);
    expect((await readServiceState(t.db)).paused).toBe(false);
    const actions = (await listAdminActions(t.db, { limit: 50 })).filter((a) => a.action === "pause" || a.action === "resume");
    expect(actions.map((a) => [a.action, a.reason])).toEqual([
      ["resume", null],
      ["pause", "fee spike"],
    ]);
  });

  it("blocks and lifts an IP range, audited with its normalised CIDR; lifting twice finds nothing", async () => {
    const c = await context();
    await expect(blockIpAsAdministrator(t.db, c, { cidr: "300.1.1.1", reason: "x" })).rejects.toMatchObject({ code: "invalid_value" });
    const block = await blockIpAsAdministrator(t.db, c, { cidr: "198.51.100.77/24", reason: "farm" });
    expect(block.cidr).toBe("198.51.100.0/24");
    expect(await unblockIpAsAdministrator(t.db, c, { id: block.id })).toMatchObject({ id: block.id });
    expect(await unblockIpAsAdministrator(t.db, c, { id: block.id })).toBeUndefined();
    const audited = (await listAdminActions(t.db, { subject: "198.51.100.0/24" })).map((a) => a.action);
    expect(audited).toEqual(["unblock_ip", "block_ip"]);
  });

  it("keeps operator actions in the overview's list however many failed sign-ins follow", async () => {
    const c = await context();
    await pauseSponsorships(t.db, c, { reason: "incident 7" });
    for (let i = 0; i < 20; i++) {
      await insertAdminAction(t.db, { action: "sign_in_failed", ipAddress: `192.0.2.${i}`, reason: "wrong administrator token", createdAt: new Date() });
    }
    const overview = await listAdminActions(t.db, { limit: 10, operatorsOnly: true });
    expect(overview.some((a) => a.action === "pause" && a.reason === "incident 7")).toBe(true);
    expect(overview.some((a) => a.action === "sign_in_failed")).toBe(false);
    await resumeSponsorships(t.db, c);
  });
});
