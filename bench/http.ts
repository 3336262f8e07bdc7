import autocannon from "autocannon";
import { cpuBetween, snapshotCpu, type CpuGroups } from "./cpu";
import { ipFor, note, randomAddress, round } from "./util";

/**
 * The HTTP figures, with autocannon's programmatic API: req/s and latency percentiles per endpoint, each
 * measured after a short warm-up, each compared with GET /health (the framework's own floor on this machine).
 */

export type HttpResult = {
  name: string;
  method: string;
  path: string;
  connections: number;
  seconds: number;
  requests: number;
  reqPerSec: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  statusCounts: Record<string, number>;
  errors: number;
  /** CPU milliseconds per request spent by each part of the stack (from /proc), when known. */
  cpuMsPerRequest?: Record<string, number>;
  /** req/s of each round, when the endpoint was measured in interleaved rounds. */
  rounds?: number[];
  /** Filled by the caller: req/s relative to /health of the same run. */
  ratioToHealth?: number;
};

export type Endpoint = {
  name: string;
  method: "GET" | "POST";
  /** Example path (for the table). */
  path: string;
  /** Each call gives the next request: its path and, for POST, its JSON body. Every request has its own client IP. */
  next: (i: number) => { path: string; body?: unknown };
};

export async function runEndpoint(
  baseUrl: string,
  endpoint: Endpoint,
  options: { connections: number; seconds: number; warmupSeconds: number; cpu?: CpuGroups },
): Promise<HttpResult> {
  let i = 0;
  const run = (duration: number) =>
    autocannon({
      url: baseUrl,
      connections: options.connections,
      duration,
      requests: [
        {
          method: endpoint.method,
          setupRequest: (req) => {
            const n = i++;
            const { path, body } = endpoint.next(n);
            return {
              ...req,
              method: endpoint.method,
              path,
              headers: {
                "x-forwarded-for": ipFor(n),
                ...(body === undefined ? {} : { "content-type": "application/json" }),
              },
              body: body === undefined ? undefined : JSON.stringify(body),
            };
          },
        },
      ],
    });
  if (options.warmupSeconds > 0) await run(options.warmupSeconds);
  note(`http: ${endpoint.method} ${endpoint.path} for ${options.seconds} s`);
  const before = options.cpu ? snapshotCpu(options.cpu) : undefined;
  const r = await run(options.seconds);
  const cpuMs = before && options.cpu ? cpuBetween(before, options.cpu) : undefined;
  const statusCounts: Record<string, number> = {};
  for (const [code, stat] of Object.entries(r.statusCodeStats ?? {})) statusCounts[code] = stat.count ?? 0;
  return {
    name: endpoint.name,
    method: endpoint.method,
    path: endpoint.path,
    connections: options.connections,
    seconds: r.duration,
    requests: r.requests.total,
    reqPerSec: round(r.requests.total / r.duration, 0),
    latencyMs: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, max: r.latency.max },
    statusCounts,
    errors: r.errors,
    ...(cpuMs && r.requests.total > 0
      ? { cpuMsPerRequest: Object.fromEntries(Object.entries(cpuMs).map(([k, v]) => [k, round(v / r.requests.total, 3)])) }
      : {}),
  };
}

/** The five endpoints of the issue, given data that exists: request ids, registered wallets with history, and unrequested wallets. */
export function standardEndpoints(data: {
  requestIds: readonly string[];
  historyWallets: readonly string[];
  freshRegisteredWallets: readonly string[];
}): Endpoint[] {
  const pick = <T>(list: readonly T[], n: number) => list[n % list.length]!;
  let fresh = 0;
  return [
    { name: "health", method: "GET", path: "/health", next: () => ({ path: "/health" }) },
    { name: "faucet", method: "GET", path: "/faucet", next: () => ({ path: "/faucet" }) },
    {
      name: "sponsorship-by-id",
      method: "GET",
      path: "/sponsorship/:id",
      next: (n) => ({ path: `/sponsorship/${pick(data.requestIds, n * 7919)}` }),
    },
    {
      name: "wallet-history",
      method: "GET",
      path: "/wallets/:address/history",
      next: (n) => ({ path: `/wallets/${pick(data.historyWallets, n * 7919)}/history` }),
    },
    {
      name: "register",
      method: "POST",
      path: "/wallets/register",
      next: () => ({ path: "/wallets/register", body: { walletAddress: randomAddress() } }),
    },
    {
      name: "sponsorship-request",
      method: "POST",
      path: "/sponsorship/request",
      // Each request for a registered wallet that has none open: a new one each time, so every answer is a 201
      // (were the seeded wallets exhausted, the wrap-around would show up as 409s in the status counts).
      next: () => ({ path: "/sponsorship/request", body: { walletAddress: pick(data.freshRegisteredWallets, fresh++) } }),
    },
  ];
}

/**
 * Measures several endpoints in interleaved rounds (A B C, A B C, ...), so a burst of load from elsewhere on the
 * machine falls on all of them alike. req/s is total requests over total time; latency percentiles are the
 * median of the rounds' percentiles.
 */
export async function runInterleaved(
  baseUrl: string,
  endpoints: readonly Endpoint[],
  options: { connections: number; seconds: number; rounds: number; cpu?: CpuGroups },
): Promise<HttpResult[]> {
  const perEndpoint = endpoints.map(() => [] as HttpResult[]);
  for (let round = 0; round < options.rounds; round++) {
    for (const [i, e] of endpoints.entries()) {
      perEndpoint[i]!.push(
        await runEndpoint(baseUrl, e, { connections: options.connections, seconds: options.seconds, warmupSeconds: round === 0 ? 3 : 1, cpu: options.cpu }),
      );
    }
  }
  const median = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  };
  return perEndpoint.map((runs) => {
    const first = runs[0]!;
    const requests = runs.reduce((a, r) => a + r.requests, 0);
    const seconds = runs.reduce((a, r) => a + r.seconds, 0);
    const statusCounts: Record<string, number> = {};
    for (const r of runs) for (const [k, v] of Object.entries(r.statusCounts)) statusCounts[k] = (statusCounts[k] ?? 0) + v;
    return {
      ...first,
      seconds,
      requests,
      reqPerSec: round(requests / seconds, 0),
      latencyMs: {
        p50: median(runs.map((r) => r.latencyMs.p50)),
        p90: median(runs.map((r) => r.latencyMs.p90)),
        p99: median(runs.map((r) => r.latencyMs.p99)),
        max: Math.max(...runs.map((r) => r.latencyMs.max)),
      },
      statusCounts,
      errors: runs.reduce((a, r) => a + r.errors, 0),
      rounds: runs.map((r) => r.reqPerSec),
      ...(first.cpuMsPerRequest ? { cpuMsPerRequest: weightedCpu(runs) } : {}),
    };
  });
}

/** Per-request CPU over several runs, weighted by their request counts. */
function weightedCpu(runs: readonly HttpResult[]): Record<string, number> {
  const total = runs.reduce((a, r) => a + r.requests, 0);
  const out: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.cpuMsPerRequest ?? {})) out[k] = (out[k] ?? 0) + (v * r.requests) / total;
  for (const k of Object.keys(out)) out[k] = round(out[k]!, 3);
  return out;
}
