import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_DISPATCHER_SETTINGS, nextAttemptAt, postWebhook, retryDelayMs } from "./dispatcher";

/**
 * decisions.md "Operators are told": "A 2xx answer within 10 s is a delivery; anything else is retried with backoff for
 * at least 24 hours." The worker's tests shorten these to run fast (worker/webhooks.test.ts); here are the figures
 * production runs with, and one attempt against a real HTTP server.
 */

const HOUR = 3_600_000;
let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    const path = req.url ?? "/";
    req.resume();
    if (path === "/slow") setTimeout(() => res.writeHead(200).end(), 1_000).unref();
    else if (path === "/redirect") res.writeHead(307, { location: "/ok" }).end();
    else if (path === "/error") res.writeHead(500).end();
    else res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe("webhook delivery: what production runs with", () => {
  it("waits 10 s for an answer and retries for 24 hours, then gives up", () => {
    expect(DEFAULT_DISPATCHER_SETTINGS.timeoutMs).toBe(10_000);
    expect(DEFAULT_DISPATCHER_SETTINGS.retryForMs).toBeGreaterThanOrEqual(24 * HOUR);
    const now = Date.parse("2026-11-24T12:00:00.000Z");
    const at = (ageMs: number, attempts: number) => nextAttemptAt(now, { attempts, createdAtMs: now - ageMs }, DEFAULT_DISPATCHER_SETTINGS);
    expect(at(24 * HOUR - 60_000, 20)?.getTime()).toBeGreaterThan(now);
    expect(at(24 * HOUR, 20)).toBeUndefined();
  });

  it("backs off: doubling from 5 s with jitter, never beyond an hour", () => {
    const low = () => 0;
    const high = () => 1;
    expect([1, 2, 3].map((a) => [retryDelayMs(a, DEFAULT_DISPATCHER_SETTINGS, low), retryDelayMs(a, DEFAULT_DISPATCHER_SETTINGS, high)])).toEqual([
      [2_500, 5_000],
      [5_000, 10_000],
      [10_000, 20_000],
    ]);
    expect(retryDelayMs(30, DEFAULT_DISPATCHER_SETTINGS, high)).toBe(HOUR);
    // An endpoint that comes back within the day is tried again within the hour.
    let elapsed = 0;
    let attempts = 0;
    while (elapsed < 24 * HOUR) elapsed += retryDelayMs(++attempts, DEFAULT_DISPATCHER_SETTINGS, high);
    expect(attempts).toBeGreaterThan(20);
  });

  it("counts a 2xx within the timeout as delivered, and a late answer, a redirect or a 500 as not", async () => {
    expect(await postWebhook(`${url}/ok`, {}, "{}", 500)).toMatchObject({ delivered: true, statusCode: 204 });
    expect(await postWebhook(`${url}/slow`, {}, "{}", 200)).toMatchObject({ delivered: false, error: "no answer within 200 ms" });
    expect(await postWebhook(`${url}/redirect`, {}, "{}", 500)).toMatchObject({ delivered: false, statusCode: 307 });
    expect(await postWebhook(`${url}/error`, {}, "{}", 500)).toMatchObject({ delivered: false, statusCode: 500 });
  });
});
