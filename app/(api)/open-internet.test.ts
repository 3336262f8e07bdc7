import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomAddress, waitFor } from "@/bench/util";
import type { Anvil } from "@/contracts/anvil";
import { addressOfKey, deployContracts } from "@/contracts/deploy-lib";
import { LOCAL_DEPLOYER_KEY, LOCAL_RELAYER_KEYS } from "@/lib/config";
import { createLogger } from "@/lib/log";
import { buildIfStale } from "@/scripts/build-if-stale";
import { startTestChain } from "@/test/chain";
import { createTestDatabase, type TestDatabase } from "@/test/db";
import { formOf } from "@/test/html-forms";
import { post, spawnInstance, stopInstance, waitUntilServing, type Answer, type Instance } from "@/test/instances";
import { freePort } from "@/test/ports";
import { startRpcProxy, type RpcProxy } from "@/test/rpc-proxy";

/**
 * "On the open internet" (decisions.md) over real HTTP: `server.ts` processes (the production build) behind one
 * trusted proxy hop (TRUST_PROXY=1), a real PostgreSQL, a real anvil behind a JSON-RPC proxy that counts calls.
 * IPv6 clients are limited by their /64, the global budget is shared by two instances on one database, the pause
 * and administrator IP blocks answer with their codes, and a refused client costs no chain call.
 */

const ADMIN_TOKEN = "open-internet-test-admin-token-0123456789abcdef";
const instances: Instance[] = [];
let dbA: TestDatabase;
let dbB: TestDatabase;
let chain: Anvil;
let proxy: RpcProxy;
let rpcCalls = 0;
let dataDir: string;
let web: string;
let web128: string;
const budgetWebs: string[] = [];

async function startWeb(env: NodeJS.ProcessEnv, name: string): Promise<string> {
  const port = await freePort();
  const instance = spawnInstance("server.ts", { ...env, PORT: String(port) }, path.join(dataDir, `${name}.log`));
  instances.push(instance);
  const url = `http://127.0.0.1:${port}`;
  await waitUntilServing(url, instance);
  return url;
}

beforeAll(async () => {
  await buildIfStale(createLogger({ component: "open-internet-test" }));
  [dbA, dbB, chain, dataDir] = await Promise.all([
    createTestDatabase(),
    createTestDatabase(),
    startTestChain({ blockTime: 0 }),
    mkdtemp(path.join(tmpdir(), "sponsorship-open-internet-")),
  ]);
  const deployment = await deployContracts({
    rpcUrl: chain.rpcUrl,
    deployerKey: LOCAL_DEPLOYER_KEY,
    relayers: LOCAL_RELAYER_KEYS.slice(0, 1).map(addressOfKey),
    sponsorAmountWei: 10n ** 16n,
    fundWei: 10n ** 19n,
  });
  proxy = await startRpcProxy(chain.rpcUrl, (body) => {
    rpcCalls += [JSON.parse(body)].flat().length;
    return undefined;
  });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    LOG_LEVEL: "warn",
    DATA_DIR: dataDir,
    DATABASE_URL: dbA.url,
    RPC_URL: proxy.url,
    CHAIN_ID: String(deployment.chainId),
    REGISTRY_ADDRESS: deployment.registryAddress,
    TREASURY_ADDRESS: deployment.treasuryAddress,
    ADMIN_TOKEN,
    TRUST_PROXY: "1",
  };
  delete env.METRICS_PORT;
  delete env.RELAYER_PRIVATE_KEYS;
  delete env.IPV6_PREFIX_LENGTH;
  delete env.SPONSOR_BUDGET_PER_HOUR;
  delete env.SPONSOR_BUDGET_PER_DAY;
  [web, web128] = await Promise.all([startWeb(env, "web"), startWeb({ ...env, IPV6_PREFIX_LENGTH: "128" }, "web-128")]);
  budgetWebs.push(...(await Promise.all([0, 1].map((i) => startWeb({ ...env, DATABASE_URL: dbB.url, SPONSOR_BUDGET_PER_HOUR: "5" }, `web-budget-${i}`)))));
}, 15 * 60_000);

afterAll(async () => {
  await Promise.all(instances.map(stopInstance));
  await proxy?.close();
  await Promise.all([dbA?.drop(), dbB?.drop(), chain?.stop()]);
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function expectProblem(answer: Answer, status: number, code: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(answer.contentType).toBe("application/problem+json");
  expect(answer.body.code).toBe(code);
}

async function registered(base: string, n: number, ip: string): Promise<`0x${string}`[]> {
  const wallets = Array.from({ length: n }, () => randomAddress());
  for (const w of wallets) expect((await post(base, "/wallets/register", { walletAddress: w }, ip)).status).toBe(201);
  return wallets;
}

async function signIn(base: string): Promise<string> {
  const res = await fetch(`${base}/admin/sign-in`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": "192.0.2.200" },
    body: JSON.stringify({ token: ADMIN_TOKEN }),
  });
  expect(res.status).toBe(200);
  return res.headers.get("set-cookie")!.split(";")[0]!;
}

describe("identity by IPv6 prefix", () => {
  it("counts ten addresses of one /64 as one client: the 11th is 429, another /64 is served, ipAddress stays full", async () => {
    const wallets = await registered(web, 12, "192.0.2.1");
    for (let i = 0; i < 10; i++) {
      const ip = `2001:db8:a:b::${(i + 1).toString(16)}`;
      const res = await post(web, "/sponsorship/request", { walletAddress: wallets[i] }, ip);
      expect(res.status, `request ${i + 1}`).toBe(201);
      expect(res.body.ipAddress).toBe(ip);
    }
    const eleventh = await post(web, "/sponsorship/request", { walletAddress: wallets[10] }, "2001:db8:a:b:ffff:1234:5678:9abc");
    expectProblem(eleventh, 429, "rate_limited");
    expect(Number(eleventh.retryAfter)).toBeGreaterThanOrEqual(1);
    expect((await post(web, "/sponsorship/request", { walletAddress: wallets[11] }, "2001:db8:a:c::1")).status).toBe(201);
  });

  it("counts a 6to4 client as the IPv4 address inside it: blocking that address blocks its whole tunnel", async () => {
    const cookie = await signIn(web);
    const [wallet] = await registered(web, 1, "192.0.2.11");
    expect((await post(web, "/admin/ip-blocks", { cidr: "198.51.100.200", reason: "tunnel owner" }, "192.0.2.200", { cookie })).status).toBe(201);
    // 2002:c633:64c8::/48 is 6to4 for 198.51.100.200: any of its 65,536 /64s.
    expectProblem(await post(web, "/sponsorship/request", { walletAddress: wallet }, "2002:c633:64c8:1234::1"), 403, "ip_blocked");
    expectProblem(await post(web, "/wallets/register", { walletAddress: randomAddress() }, "2002:c633:64c8:ffff::9"), 403, "ip_blocked");
  });

  it("blocks a tunnel's client when the administrator blocks the IPv6 address a request showed, as the IPv4 address it carries", async () => {
    const cookie = await signIn(web);
    const [wallet] = await registered(web, 1, "192.0.2.12");
    // A request's ipAddress as the dashboard shows it: 6to4 for 198.51.100.201 (c633:64c9).
    const block = await post(web, "/admin/ip-blocks", { cidr: "2002:c633:64c9:7::1", reason: "seen on the dashboard" }, "192.0.2.200", { cookie });
    expect([block.status, block.body.cidr]).toEqual([201, "198.51.100.201/32"]);
    expectProblem(await post(web, "/sponsorship/request", { walletAddress: wallet }, "2002:c633:64c9:8888::2"), 403, "ip_blocked");
    expectProblem(await post(web, "/wallets/register", { walletAddress: randomAddress() }, "198.51.100.201"), 403, "ip_blocked");
  });

  it("treats every IPv6 address on its own with IPV6_PREFIX_LENGTH=128", async () => {
    const wallets = await registered(web128, 11, "192.0.2.2");
    for (let i = 0; i < 11; i++) {
      const res = await post(web128, "/sponsorship/request", { walletAddress: wallets[i] }, `2001:db8:128:1::${(i + 1).toString(16)}`);
      expect(res.status, `request ${i + 1}`).toBe(201);
    }
  });

  it("counts registrations of one /64 together", async () => {
    // The registration limit (100 per hour) is per identity: addresses of one /64 share it.
    for (let i = 0; i < 100; i++) {
      expect((await post(web, "/wallets/register", { walletAddress: randomAddress() }, `2001:db8:5:5::${(i + 1).toString(16)}`)).status).toBe(201);
    }
    expectProblem(await post(web, "/wallets/register", { walletAddress: randomAddress() }, "2001:db8:5:5:ffff::1"), 429, "rate_limited");
    expect((await post(web, "/wallets/register", { walletAddress: randomAddress() }, "2001:db8:5:6::1")).status).toBe(201);
  });
});

describe("the global budget", () => {
  it("creates five requests across two instances, then answers 429 budget_exhausted on both with Retry-After", async () => {
    const wallets = await registered(budgetWebs[0]!, 7, "192.0.2.3");
    for (let i = 0; i < 5; i++) {
      const res = await post(budgetWebs[i % 2]!, "/sponsorship/request", { walletAddress: wallets[i] }, `203.0.113.${i + 1}`);
      expect(res.status, `request ${i + 1}`).toBe(201);
    }
    for (const [i, base] of budgetWebs.entries()) {
      const refused = await post(base, "/sponsorship/request", { walletAddress: wallets[5 + i] }, `203.0.113.${10 + i}`);
      expectProblem(refused, 429, "budget_exhausted");
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
      // Within the hour and a minute the budget's window holds.
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(3660);
    }
  });
});

describe("pause and resume", () => {
  it("answers 503 sponsorships_paused with Retry-After: 60 while paused, /health degraded with the reason, and creates again after resume", async () => {
    const cookie = await signIn(web);
    const [wallet] = await registered(web, 1, "192.0.2.4");
    const paused = await post(web, "/admin/pause", { reason: "treasury refill" }, "192.0.2.200", { cookie });
    expect(paused.status).toBe(200);
    expect(paused.body.paused).toBe(true);

    const refused = await post(web, "/sponsorship/request", { walletAddress: wallet }, "192.0.2.5");
    expectProblem(refused, 503, "sponsorships_paused");
    expect(refused.retryAfter).toBe("60");
    const health = (await (await fetch(`${web}/health`)).json()) as { status: string; checks: { sponsorships: { status: string; reason: string } } };
    expect(health.status).toBe("degraded");
    expect(health.checks.sponsorships).toMatchObject({ status: "degraded", reason: "treasury refill" });

    expect((await post(web, "/admin/resume", {}, "192.0.2.200", { cookie })).status).toBe(200);
    expect((await post(web, "/sponsorship/request", { walletAddress: wallet }, "192.0.2.5")).status).toBe(201);
  });

  it("refuses the admin routes without a session, and a pause without a reason", async () => {
    expectProblem(await post(web, "/admin/pause", { reason: "x" }, "192.0.2.6"), 401, "unauthorized");
    const cookie = await signIn(web);
    expectProblem(await post(web, "/admin/pause", {}, "192.0.2.200", { cookie }), 422, "invalid_value");
    expectProblem(await post(web, "/admin/pause", { reason: "   " }, "192.0.2.200", { cookie }), 422, "invalid_value");
  });
});

describe("administrator IP blocks", () => {
  it("refuses 198.51.100.77 with 403 ip_blocked at both POSTs under a block of 198.51.100.0/24, serves 198.51.101.1, and serves it again once lifted", async () => {
    const cookie = await signIn(web);
    const [wallet, other] = await registered(web, 2, "192.0.2.7");
    const created = await post(web, "/admin/ip-blocks", { cidr: "198.51.100.0/24", reason: "farm" }, "192.0.2.200", { cookie });
    expect(created.status).toBe(201);
    expect(Object.keys(created.body).sort()).toEqual(["cidr", "createdAt", "id", "reason"]);
    expect(created.body).toMatchObject({ cidr: "198.51.100.0/24", reason: "farm" });

    expectProblem(await post(web, "/wallets/register", { walletAddress: randomAddress() }, "198.51.100.77"), 403, "ip_blocked");
    expectProblem(await post(web, "/sponsorship/request", { walletAddress: wallet }, "198.51.100.77"), 403, "ip_blocked");
    expect((await post(web, "/sponsorship/request", { walletAddress: other }, "198.51.101.1")).status).toBe(201);

    const lifted = await fetch(`${web}/admin/ip-blocks/${String(created.body.id)}`, {
      method: "DELETE",
      headers: { cookie, "x-forwarded-for": "192.0.2.200" },
    });
    expect(lifted.status).toBe(204);
    expect((await post(web, "/sponsorship/request", { walletAddress: wallet }, "198.51.100.77")).status).toBe(201);
    const again = await fetch(`${web}/admin/ip-blocks/${String(created.body.id)}`, { method: "DELETE", headers: { cookie, "x-forwarded-for": "192.0.2.200" } });
    expect(again.status).toBe(404);
  });

  it("blocks an IPv6 client's whole /64 when one of its addresses is blocked, and refuses bad CIDR text with 422", async () => {
    const cookie = await signIn(web);
    const [wallet] = await registered(web, 1, "192.0.2.8");
    expect((await post(web, "/admin/ip-blocks", { cidr: "2001:db8:bad::1", reason: "one address" }, "192.0.2.200", { cookie })).status).toBe(201);
    expectProblem(await post(web, "/sponsorship/request", { walletAddress: wallet }, "2001:db8:bad::9999"), 403, "ip_blocked");
    for (const cidr of ["not-a-cidr", "198.51.100.0/33", "0.0.0.0/0", ""]) {
      expectProblem(await post(web, "/admin/ip-blocks", { cidr, reason: "bad" }, "192.0.2.200", { cookie }), 422, "invalid_value");
    }
  });

  it("makes no JSON-RPC call for 50 requests from a blocked address", async () => {
    const cookie = await signIn(web);
    const [wallet] = await registered(web, 1, "192.0.2.9");
    expect((await post(web, "/admin/ip-blocks", { cidr: "203.0.113.0/24", reason: "abuse" }, "192.0.2.200", { cookie })).status).toBe(201);
    const before = rpcCalls;
    for (let i = 0; i < 50; i++) expectProblem(await post(web, "/sponsorship/request", { walletAddress: wallet }, "203.0.113.50"), 403, "ip_blocked");
    expect(rpcCalls - before).toBe(0);
    // The proxy does see this web server's chain calls (so the 0 above is not a proxy bypassed): /health reads the
    // chain within its cache time.
    await waitFor(
      "the web server's chain reads to reach the proxy",
      async () => {
        await fetch(`${web}/health`);
        return rpcCalls > before ? true : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 500 },
    );
  });
});

describe("the same host over plain http, while served over https (behind the trusted proxy)", () => {
  it("is not the app's own origin: the administrator's routes and the pages refuse it with 403 origin_not_allowed, the https origin is served", async () => {
    const cookie = await signIn(web);
    const host = new URL(web).host;
    const ask = (path: string, origin: string) =>
      fetch(`${web}${path}`, { headers: { cookie, origin, "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.201" } });
    for (const path of ["/admin/overview", "/dashboard"]) {
      const downgraded = await ask(path, `http://${host}`);
      expect(downgraded.status, path).toBe(403);
      expect(((await downgraded.json()) as { code: string }).code).toBe("origin_not_allowed");
      expect(downgraded.headers.get("access-control-allow-origin")).toBeNull();
      const own = await ask(path, `https://${host}`);
      expect(own.status, path).toBe(200);
      await own.body?.cancel();
    }
  });
});

describe("the dashboard's session cookie over https (behind the trusted proxy)", () => {
  it("is __Host-admin_session, Secure on the whole site, not shadowed by planted admin_session cookies, and both names are cleared at sign-out", async () => {
    const host = new URL(web).host;
    const https = { "x-forwarded-proto": "https", "x-forwarded-for": "192.0.2.202", origin: `https://${host}` };
    const submit = (route: string, form: FormData, cookie?: string) =>
      fetch(`${web}${route}`, { method: "POST", body: form, headers: { ...https, ...(cookie ? { cookie } : {}) }, redirect: "manual" });
    const signInForm = formOf(await (await fetch(`${web}/dashboard`, { headers: https })).text(), 'name="token"');
    signInForm.set("token", ADMIN_TOKEN);
    const signedIn = await submit("/dashboard", signInForm);
    expect(signedIn.status).toBe(303);
    const [setCookie] = signedIn.headers.getSetCookie();
    // Before: admin_session, which a sibling subdomain or a tampered http answer can plant ahead of it.
    expect(setCookie).toMatch(/^__Host-admin_session=[A-Za-z0-9_-]{43}; Path=\/; /);
    expect(setCookie).toMatch(/; Secure/);
    expect(setCookie).not.toMatch(/domain=/i);
    const cookie = setCookie!.split(";")[0]!;
    const planted = Array.from({ length: 4 }, (_, i) => `admin_session=${String.fromCharCode(65 + i).repeat(43)}`).join("; ");
    const dashboard = await (await fetch(`${web}/dashboard`, { headers: { ...https, cookie: `${planted}; ${cookie}` } })).text();
    expect(dashboard).toContain("Sign out");
    const signedOut = await submit("/dashboard", formOf(dashboard, "Sign out"), cookie);
    expect(signedOut.status).toBe(303);
    const cleared = signedOut.headers.getSetCookie();
    expect(cleared.map((c) => c.split("=")[0]).sort()).toEqual(["__Host-admin_session", "admin_session"]);
    for (const c of cleared) expect(c).toMatch(/; Secure/);
    const after = await (await fetch(`${web}/dashboard`, { headers: { ...https, cookie } })).text();
    expect(after).toContain("Administrator sign-in");
  });
});
