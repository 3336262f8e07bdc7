import { spawn } from "node:child_process";
import { freePort } from "@/test/ports";
import { runEndpoint, type Endpoint } from "./http";
import { startStack } from "./stack";
import { median, note, randomAddress } from "./util";

/**
 * The web server's floor (`npx tsx bench/floors.ts`, `TEST_PORT_BASE` for the ports; `BENCH_ROUNDS`, 3): CPU per
 * request of the web process for answers that do less and less of the service's own work, measured in interleaved
 * rounds on one stack (1-s blocks) and one bare node:http server beside it:
 * - `POST /wallets/register`: a whole registration (body, validation, one database call);
 * - `GET /health`: one database read;
 * - `GET /sponsorship/not-a-uuid`, then `GET /sponsorship/not-a-uuid/`: the same route handler's 400 (no body, no
 *   database), first through its built entrypoint (server.ts, lib/http/entrypoints.ts: how every public API request is served),
 *   then through Next's router (a trailing slash is Next's to route): what the entrypoint dispatch skips;
 * - `POST /sponsorship/request` with a body that fails validation, then `POST /sponsorship/request/`: the same pair
 *   for a POST (the body read and validated, 400 invalid_address, no database);
 * - `GET` and `POST /no-such-path`: the catch-all route handler's 404 through Next's router (no body read, no
 *   database): what Next.js costs per request with nothing of ours in it but server.ts and the route wrapper;
 * - `GET /%ZZ`: answered by server.ts itself before Next.js sees it (its per-request steps, then a 400);
 * - the same JSON from a bare node:http server in its own process: what Node's HTTP costs.
 * What is left between the entrypoint's answer and server.ts's own is the framework's route module, paid twice per
 * sponsorship (register, request); docs/performance.md, "Session 7" and "Session 16".
 */
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const seconds = Number(process.env.BENCH_SECONDS ?? 5);

const BARE_SERVER = `
const http = require("node:http");
const body = JSON.stringify({ type: "about:blank", title: "Not Found", status: 404 });
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.statusCode = 404;
    res.setHeader("content-type", "application/problem+json");
    res.setHeader("content-length", Buffer.byteLength(body));
    res.end(body);
  });
});
server.keepAliveTimeout = 5000;
server.listen(Number(process.env.PORT), "127.0.0.1", () => process.stdout.write("ready\\n"));`;

const stack = await startStack({ name: "floors", blockTime: 1, logDir: process.env.BENCH_LOG_DIR ?? "/tmp" });
const barePort = await freePort();
const bare = spawn(process.execPath, ["-e", BARE_SERVER], { env: { ...process.env, PORT: String(barePort) }, stdio: ["ignore", "pipe", "inherit"] });
try {
  await new Promise<void>((resolve, reject) => {
    bare.stdout!.once("data", () => resolve());
    bare.once("exit", (code) => reject(new Error(`bare server exited ${code}`)));
  });
  const webCpu = { web: () => stack.cpu!.web!() };
  const bareCpu = { web: () => [bare.pid!] };
  const cases: { label: string; url: string; cpu: typeof webCpu; status: number; endpoint: Endpoint }[] = [
    {
      label: "POST /wallets/register (whole registration)",
      url: stack.url,
      cpu: webCpu,
      status: 201,
      endpoint: {
        name: "register",
        method: "POST",
        path: "/wallets/register",
        next: () => ({ path: "/wallets/register", body: { walletAddress: randomAddress() } }),
      },
    },
    {
      label: "GET /health (one database read)",
      url: stack.url,
      cpu: webCpu,
      status: 200,
      endpoint: { name: "health", method: "GET", path: "/health", next: () => ({ path: "/health" }) },
    },
    {
      label: "GET /sponsorship/not-a-uuid (route handler by its entrypoint, 400, no database)",
      url: stack.url,
      cpu: webCpu,
      status: 400,
      endpoint: { name: "get-400-entrypoint", method: "GET", path: "/sponsorship/not-a-uuid", next: () => ({ path: "/sponsorship/not-a-uuid" }) },
    },
    {
      label: "GET /sponsorship/not-a-uuid/ (the same handler through Next's router)",
      url: stack.url,
      cpu: webCpu,
      status: 400,
      endpoint: { name: "get-400-router", method: "GET", path: "/sponsorship/not-a-uuid/", next: () => ({ path: "/sponsorship/not-a-uuid/" }) },
    },
    {
      label: "POST /sponsorship/request, invalid address (route handler by its entrypoint: body read and validated, 400)",
      url: stack.url,
      cpu: webCpu,
      status: 400,
      endpoint: {
        name: "post-400-entrypoint",
        method: "POST",
        path: "/sponsorship/request",
        next: () => ({ path: "/sponsorship/request", body: { walletAddress: "0x12" } }),
      },
    },
    {
      label: "POST /sponsorship/request/, invalid address (the same handler through Next's router)",
      url: stack.url,
      cpu: webCpu,
      status: 400,
      endpoint: {
        name: "post-400-router",
        method: "POST",
        path: "/sponsorship/request/",
        next: () => ({ path: "/sponsorship/request/", body: { walletAddress: "0x12" } }),
      },
    },
    {
      label: "POST /no-such-path (Next.js route handler, 404, no database)",
      url: stack.url,
      cpu: webCpu,
      status: 404,
      endpoint: { name: "post-404", method: "POST", path: "/no-such-path", next: () => ({ path: "/no-such-path", body: { walletAddress: randomAddress() } }) },
    },
    {
      label: "GET /no-such-path (Next.js route handler, 404, no database)",
      url: stack.url,
      cpu: webCpu,
      status: 404,
      endpoint: { name: "get-404", method: "GET", path: "/no-such-path", next: () => ({ path: "/no-such-path" }) },
    },
    {
      label: "GET /%ZZ (answered by server.ts before Next.js: metrics, client address, headers, request id, 400)",
      url: stack.url,
      cpu: webCpu,
      status: 400,
      endpoint: { name: "server-400", method: "GET", path: "/%ZZ", next: () => ({ path: "/%ZZ" }) },
    },
    {
      label: "POST to a bare node:http server (404 JSON, own process)",
      url: `http://127.0.0.1:${barePort}`,
      cpu: bareCpu,
      status: 404,
      endpoint: { name: "bare", method: "POST", path: "/no-such-path", next: () => ({ path: "/no-such-path", body: { walletAddress: randomAddress() } }) },
    },
  ];
  const figures = cases.map(() => ({ cpu: [] as number[], rate: [] as number[] }));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? cases.map((_, i) => i) : cases.map((_, i) => cases.length - 1 - i);
    for (const i of order) {
      const c = cases[i]!;
      const r = await runEndpoint(c.url, c.endpoint, { connections: 32, seconds, warmupSeconds: round === 0 ? 3 : 1, cpu: c.cpu });
      // A case answered with anything else than its status would be measuring another path than its label says.
      const other = Object.entries(r.statusCounts).filter(([code, n]) => Number(code) !== c.status && n > 0);
      if (other.length > 0 || r.errors > 0) throw new Error(`${c.label}: expected only ${c.status}, got ${JSON.stringify(r.statusCounts)}, ${r.errors} errors`);
      figures[i]!.cpu.push(r.cpuMsPerRequest?.web ?? Number.NaN);
      figures[i]!.rate.push(r.reqPerSec);
    }
  }
  note(`web process CPU per request, median of ${rounds} interleaved rounds of ${seconds} s, 32 connections:`);
  for (const [i, c] of cases.entries()) {
    const f = figures[i]!;
    note(`  ${c.label}: ${median(f.cpu).toFixed(3)} ms (rounds ${f.cpu.map((x) => x.toFixed(2)).join(", ")}), ${median(f.rate)} req/s`);
  }
} finally {
  bare.kill("SIGTERM");
  await stack.stop();
}
