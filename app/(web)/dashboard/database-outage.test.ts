import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "@/bench/util";
import { randomAddress } from "@/test/api-client";
import { createLogger } from "@/lib/log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { spawnInstance, stopInstance, waitUntilServing, webServerEnv, type Instance } from "@/test/instances";
import { formOf, unescapeHtml } from "@/test/html-forms";
import { freePort } from "@/test/ports";
import { startTcpRelay, type TcpRelay } from "@/test/tcp-relay";

/**
 * The pages during a database outage (decisions.md, "Wire format": never a 500 while PostgreSQL cannot be reached;
 * the pages show a notice and work again by themselves once it is back). The web server as `npm start` runs it (`server.ts`, the production build) reaches a real
 * PostgreSQL through a TCP relay that the test cuts (every connection dropped, new ones refused), as
 * lib/http/database-outage.test.ts does for the API. Pages are fetched over real HTTP.
 */

const ADMIN_TOKEN = "database-outage-test-admin-token-0123456789abcdef";
const NOTICE = "The database is not reachable right now; this page will work again by itself when it is back.";
const FRAME = "Gas sponsorship · Dashboard";

let t: TestDatabase;
let relay: TcpRelay;
let dataDir: string;
let web: Instance | undefined;
let base: string;
let cookie: string;

type Page = { status: number; html: string; contentType: string | null; cacheControl: string | null };

async function page(route: string, headers: Record<string, string> = {}): Promise<Page> {
  const res = await fetch(`${base}${route}`, { headers, redirect: "manual" });
  return { status: res.status, html: await res.text(), contentType: res.headers.get("content-type"), cacheControl: res.headers.get("cache-control") };
}

/** Every page that reads the database (the dashboard's; `/` and `/request` read none on the server). */
const DATABASE_PAGES = [
  "/dashboard",
  "/dashboard?range=7d",
  "/dashboard/requests",
  `/dashboard/requests/${randomUUID()}`,
  `/dashboard/wallets?address=${randomAddress()}`,
  "/dashboard/controls",
  "/dashboard/webhooks",
];

const OUTAGE_FORM_ERROR = "The database is not reachable right now, so nothing was done. Try again in a few seconds.";

/** Waits until the overview renders its data with the administrator's cookie (the database reachable again). */
async function overviewRenders(): Promise<void> {
  await waitFor(
    "the overview to render",
    async () => {
      const answer = await page("/dashboard", { cookie });
      return answer.status === 200 && answer.html.includes("Requests by status") ? true : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
}

async function submit(route: string, form: FormData, headers: Record<string, string> = {}): Promise<Page> {
  const res = await fetch(`${base}${route}`, { method: "POST", body: form, headers: { origin: base, ...headers }, redirect: "manual" });
  return { status: res.status, html: await res.text(), contentType: res.headers.get("content-type"), cacheControl: res.headers.get("cache-control") };
}

/** During the outage: the notice in the dashboard's frame on every page that reads the database; the rest as usual. */
async function expectOutageAnswers(): Promise<void> {
  for (const route of DATABASE_PAGES) {
    const answer = await page(route, { cookie });
    // 200, not 503: Next 16 gives a page no supported way to choose another status (docs/ui.md).
    expect(answer.status, `${route}: ${answer.html.slice(0, 300)}`).toBe(200);
    expect(answer.contentType, route).toMatch(/^text\/html/);
    // ... and stored by no cache, so nobody is served the notice after the database is back.
    expect(answer.cacheControl, route).toMatch(/no-store/);
    expect(answer.html, route).toContain(NOTICE);
    expect(answer.html, route).toContain(FRAME);
    expect(answer.html, route).toContain("The database is not reachable</h1>");
    // Nothing internal leaks: no driver code, host or port.
    expect(answer.html, route).not.toMatch(/ECONNREFUSED|CONNECTION_CLOSED|CONNECTION_ENDED|127\.0\.0\.1:\d+/);
  }
  // Signed out, the dashboard needs no database to show its sign-in form.
  const signedOut = await page("/dashboard");
  expect(signedOut.status).toBe(200);
  expect(signedOut.html).toContain("Administrator sign-in");
  expect(signedOut.html).not.toContain(NOTICE);
  // The pages for end users read the database only through the API (which answers 503 unavailable).
  for (const [route, text] of [
    ["/", "Request gas for a wallet"],
    ["/request", "Get gas for a new wallet"],
  ] as const) {
    const answer = await page(route);
    expect(answer.status, route).toBe(200);
    expect(answer.html, route).toContain(text);
  }
}

beforeAll(async () => {
  await buildIfStale(createLogger({ component: "database-outage-test" }));
  [t, dataDir] = await Promise.all([createTestDatabase(), mkdtemp(path.join(tmpdir(), "sponsorship-database-outage-"))]);
  const target = new URL(t.url);
  relay = await startTcpRelay({ host: target.hostname, port: Number(target.port) });
  const viaRelay = new URL(t.url);
  viaRelay.port = String(relay.port);
  const port = await freePort();
  const env = webServerEnv({ port, dataDir, databaseUrl: viaRelay.toString(), adminToken: ADMIN_TOKEN });
  web = spawnInstance("server.ts", env, path.join(dataDir, "web.log"));
  base = `http://127.0.0.1:${port}`;
  await waitUntilServing(base, web);
  const signIn = await fetch(`${base}/admin/sign-in`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: ADMIN_TOKEN }),
  });
  expect(signIn.status).toBe(200);
  cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
}, 15 * 60_000);

afterAll(async () => {
  await stopInstance(web);
  await relay?.close();
  await t?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

describe("the pages during a database outage", () => {
  it("show the outage notice in the dashboard's frame instead of an error page, and work again by themselves when the database is back", async () => {
    // Served normally first: the pages read through the relay.
    for (const route of DATABASE_PAGES) {
      const answer = await page(route, { cookie });
      expect(answer.status, route).toBe(200);
      expect(answer.html, route).not.toContain(NOTICE);
    }

    await relay.cut();
    try {
      await expectOutageAnswers();
    } finally {
      await relay.restore();
    }

    // No restart: the same server serves the pages again once the database is reachable.
    await overviewRenders();
    for (const route of DATABASE_PAGES) {
      const answer = await page(route, { cookie });
      expect(answer.status, route).toBe(200);
      expect(answer.html, route).not.toContain(NOTICE);
    }
  });

  it("answers a sign-in or a change submitted during the outage with the form's error, not an error page, and changes nothing", async () => {
    const signInForm = formOf((await page("/dashboard")).html, 'name="token"');
    signInForm.set("token", ADMIN_TOKEN);
    const pauseForm = formOf((await page("/dashboard/controls", { cookie })).html, "Pause sponsorships");
    pauseForm.set("reason", "submitted during the outage");

    await relay.cut();
    try {
      const signIn = await submit("/dashboard", signInForm);
      expect(signIn.status, signIn.html.slice(0, 300)).toBe(200);
      expect(signIn.html).toContain(OUTAGE_FORM_ERROR);
      expect(signIn.html).toContain("Administrator sign-in");
      // A change: the action answers the outage (the page around it shows the notice).
      const pause = await submit("/dashboard/controls", pauseForm, { cookie });
      expect(pause.status, pause.html.slice(0, 300)).toBe(200);
      expect(pause.html).toContain(NOTICE);
    } finally {
      await relay.restore();
    }
    const [state] = await t.db.$client<{ paused: boolean }[]>`SELECT paused FROM service_state`;
    expect(state?.paused ?? false).toBe(false);
  });

  it("tells a database too busy to answer in time (its lock timeout) from one that cannot be reached", async () => {
    await waitFor("the webhooks page to render", async () => ((await page("/dashboard/webhooks", { cookie })).status === 200 ? true : undefined), {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    // A transaction holds the webhooks page's table longer than the web pool's lock timeout (2 s): 55P03.
    const holder = await t.db.$client.reserve();
    try {
      await holder.unsafe("BEGIN");
      await holder.unsafe("LOCK TABLE webhook_endpoints IN ACCESS EXCLUSIVE MODE");
      const answer = await page("/dashboard/webhooks", { cookie });
      expect(answer.status).toBe(200);
      expect(answer.html).toContain("The database is too busy to answer this page in time");
      expect(answer.html).not.toContain(NOTICE);
    } finally {
      await holder.unsafe("ROLLBACK");
      holder.release();
    }
    expect((await page("/dashboard/webhooks", { cookie })).status).toBe(200);
  });

  it("still fails a page with an error that is not an outage, instead of dressing it up as one", async () => {
    await waitFor("the webhooks page to render", async () => ((await page("/dashboard/webhooks", { cookie })).status === 200 ? true : undefined), {
      timeoutMs: 20_000,
      intervalMs: 200,
    });
    // A real database error that is not an outage: the webhooks page's table is missing (42P01, undefined_table).
    await t.db.$client.unsafe("ALTER TABLE webhook_endpoints RENAME TO webhook_endpoints_away");
    try {
      const answer = await page("/dashboard/webhooks", { cookie });
      expect(answer.status).toBe(500);
      expect(answer.html).toContain('id="__next_error__"');
      expect(answer.html).not.toContain(NOTICE);
    } finally {
      await t.db.$client.unsafe("ALTER TABLE webhook_endpoints_away RENAME TO webhook_endpoints");
    }
    expect((await page("/dashboard/webhooks", { cookie })).status).toBe(200);
  });

  it("signs the browser out during the outage (the cookie cleared) and says the session itself may not have ended, instead of an error page", async () => {
    await overviewRenders();
    const signOutForm = formOf((await page("/dashboard", { cookie })).html, "Sign out");
    await relay.cut();
    try {
      // Before: Next's 500 page (the session could not be read), and the cookie stayed.
      const res = await fetch(`${base}/dashboard`, { method: "POST", body: signOutForm, headers: { origin: base, cookie }, redirect: "manual" });
      expect(res.status, (await res.clone().text()).slice(0, 300)).toBe(303);
      expect(res.headers.get("location")).toBe("/dashboard?signed-out=database-unreachable");
      // The cookie is cleared (expired at once).
      expect(res.headers.get("set-cookie")).toMatch(/^admin_session=;.*Expires=Thu, 01 Jan 1970/i);
      const after = await page("/dashboard?signed-out=database-unreachable");
      expect(after.status).toBe(200);
      expect(after.html).toContain("Administrator sign-in");
      expect(unescapeHtml(after.html)).toContain(
        "You are signed out of this browser. The database did not answer, so the session may not have ended on the server: it lapses by itself within 12 hours.",
      );
    } finally {
      await relay.restore();
    }
    // As the notice says: the session itself was not ended, the old cookie still opens the dashboard (until it lapses).
    await overviewRenders();
    // With the database there, the same sign-out ends the session and says nothing more.
    const res = await fetch(`${base}/dashboard`, { method: "POST", body: signOutForm, headers: { origin: base, cookie }, redirect: "manual" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/dashboard");
    expect((await page("/dashboard", { cookie })).html).toContain("Administrator sign-in");
  });
});
