import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort } from "./ports";

describe("freePort", () => {
  it("gives ports below the OS's ephemeral range, distinct, in this worker's own band", async () => {
    const ports = [];
    for (let i = 0; i < 20; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(20);
    const band = Number(process.env.VITEST_POOL_ID);
    expect(band).toBeGreaterThan(0);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(20_000 + band * 400);
      expect(port).toBeLessThan(20_000 + (band + 1) * 400);
    }
  });

  it("skips a port that is bound", async () => {
    const first = await freePort();
    // Bind the next few candidates ourselves: freePort must step over them.
    const held = await Promise.all(
      [1, 2, 3].map(
        (k) =>
          new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
            const server = createServer();
            server.once("error", reject);
            server.listen(first + k, "127.0.0.1", () => resolve(server));
          }),
      ),
    );
    try {
      const next = await freePort();
      expect([first + 1, first + 2, first + 3]).not.toContain(next);
    } finally {
      await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    }
  });
});
