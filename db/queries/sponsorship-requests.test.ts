import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sponsorshipIpLockKey, walletLockKey } from "@/lib/sponsorship/lock-keys";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { createRequestInDatabase, type CreationCallInput } from "./sponsorship-requests";

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => t?.drop());

function input(ip: string, address: string): CreationCallInput {
  const now = new Date();
  return {
    ip,
    address,
    now,
    ipLimit: 10,
    walletLimit: 5,
    windowStart: new Date(now.getTime() - 3_600_000),
    replayStart: new Date(now.getTime() - 5_000),
    autoBlockMinutes: 15,
    ipBlockReason: "ip",
    walletBlockReason: "wallet",
    requestId: crypto.randomUUID(),
    userAgent: null,
    onChainSponsored: null,
  };
}

async function waitingAdvisoryLocks(): Promise<number> {
  const rows = await t.db.$client.unsafe<{ n: number }[]>(
    "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
  );
  return rows[0]!.n;
}

describe("create_sponsorship_request", () => {
  // Other writers (administrator blocks in lib/sponsorship/blocks.ts) serialise on the keys of lock-keys.ts; the
  // SQL function spells those keys itself, so this proves they are the same.
  for (const [name, keyOf] of [
    ["the IP's", (ip: string) => sponsorshipIpLockKey(ip)],
    ["the wallet's", (_ip: string, address: string) => walletLockKey(address)],
  ] as const) {
    it(`waits for ${name} advisory lock under the key of lib/sponsorship/lock-keys.ts`, async () => {
      const ip = `198.51.100.${Math.floor(Math.random() * 250)}`;
      const address = `0x${crypto.randomUUID().replaceAll("-", "").padEnd(40, "0")}`;
      const holder = await t.db.$client.reserve();
      try {
        await holder.unsafe("BEGIN");
        await holder.unsafe("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))", [keyOf(ip, address)]);
        let settled = false;
        const call = createRequestInDatabase(t.db, input(ip, address)).finally(() => {
          settled = true;
        });
        const deadline = Date.now() + 10_000;
        while ((await waitingAdvisoryLocks()) === 0) {
          if (Date.now() > deadline) throw new Error("the creation never waited for the lock");
          await new Promise((resolve) => setImmediate(resolve));
        }
        expect(settled).toBe(false);
        await holder.unsafe("COMMIT");
        await expect(call).resolves.toEqual({ refusal: "wallet_not_registered" });
      } finally {
        holder.release();
      }
    });
  }
});
