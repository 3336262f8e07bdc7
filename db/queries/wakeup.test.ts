import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { WAKEUP_CHANNEL, wakeWorkers } from "./wakeup";

let t: TestDatabase;
let listener: postgres.Sql;
let received = 0;
let onNotification: (() => void) | undefined;

beforeAll(async () => {
  t = await createTestDatabase();
  listener = postgres(t.url, { max: 1, onnotice: () => {} });
  await listener.listen(WAKEUP_CHANNEL, () => {
    received++;
    onNotification?.();
  });
});
afterAll(async () => {
  await listener?.end({ timeout: 1 });
  await t?.drop();
});

/** Resolves once `count` notifications have arrived in all (rejects after 10 s). */
function untilReceived(count: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${received} of ${count} notifications after 10 s`)), 10_000);
    const check = () => {
      if (received >= count) {
        clearTimeout(timer);
        resolve();
      }
    };
    onNotification = check;
    check();
  });
}

/** A round trip through the listener's own connection: every notification sent before it has been delivered. */
async function settled(): Promise<void> {
  await t.db.$client`SELECT 1`;
  await listener`SELECT 1`;
}

describe("wakeWorkers", () => {
  it("coalesces a burst into two notifications: one at once, one after it for every call made meanwhile", async () => {
    const errors: unknown[] = [];
    const start = received;
    for (let i = 0; i < 50; i++) wakeWorkers(t.db, (error) => errors.push(error));
    await untilReceived(start + 2);
    await settled();
    expect(received - start).toBe(2);

    // Idle again: the next call notifies on its own.
    wakeWorkers(t.db, (error) => errors.push(error));
    await untilReceived(start + 3);
    await settled();
    expect(received - start).toBe(3);
    expect(errors).toEqual([]);
  });

  it("reports a failure to the callback instead of throwing, and works again afterwards", async () => {
    const closed = await createTestDatabase();
    await closed.db.$client.end();
    const errors: unknown[] = [];
    expect(() => wakeWorkers(closed.db, (error) => errors.push(error))).not.toThrow();
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + 10_000;
      const poll = () => (errors.length > 0 ? resolve() : Date.now() > deadline ? reject(new Error("no error reported")) : setTimeout(poll, 20));
      poll();
    });
    expect(errors).toHaveLength(1);
    await closed.drop();

    const start = received;
    wakeWorkers(t.db, (error) => errors.push(error));
    await untilReceived(start + 1);
  });
});
