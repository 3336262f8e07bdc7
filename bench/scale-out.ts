import postgres from "postgres";
import { freePort } from "@/test/ports";
import { withExtraPids } from "./cpu";
import { runEndpoint, standardEndpoints } from "./http";
import { httpData, rejectOpenRequests } from "./http-data";
import { measurePipeline } from "./pipeline";
import type { ScaleOutResult } from "./report";
import { settings } from "./settings";
import { healthy, spawnInstance, type Stack } from "./stack";
import { note, waitFor } from "./util";

/** Two web servers and two workers on one database and chain, against one of each (the `scaleout` phase). */

async function relayerLeases(databaseUrl: string): Promise<Record<string, number>> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ owner: string | null; n: number }[]>`
      SELECT lease_owner AS owner, count(*)::int AS n FROM relayer_accounts
      WHERE lease_expires_at > now() GROUP BY lease_owner`;
    return Object.fromEntries(rows.map((r) => [r.owner ?? "none", r.n]));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

export async function runScaleOut(stack: Stack, logDir: string): Promise<ScaleOutResult> {
  // One web server and one worker first, measured right here so both sides see the same chain and tables.
  const common = {
    databaseUrl: stack.databaseUrl!,
    rpcUrl: stack.rpcUrl!,
    treasury: stack.treasuryAddress!,
    requests: settings.requests,
  };
  const singlePipeline = await measurePipeline({ ...common, baseUrls: [stack.url], mode: "burst", concurrency: settings.burstConcurrency, cpu: stack.cpu });

  const port2 = await freePort();
  note(`scale-out: a second web server on ${port2} and a second worker`);
  const web2 = spawnInstance(stack, "web", { PORT: String(port2) }, logDir);
  const worker2 = spawnInstance(stack, "worker", {}, logDir);
  const url2 = `http://127.0.0.1:${port2}`;
  const cpu = stack.cpu ? withExtraPids(stack.cpu, { web: () => [web2.pid], worker: () => [worker2.pid] }) : undefined;
  const bothLease = () =>
    waitFor(
      "both workers to hold relayer leases",
      async () => {
        const l = await relayerLeases(stack.databaseUrl!);
        return Object.keys(l).filter((k) => k !== "none").length >= 2 ? l : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    ).catch(async () => relayerLeases(stack.databaseUrl!));
  try {
    await waitFor("the second web server", async () => ((await healthy(url2)) ? true : undefined), { timeoutMs: 120_000, intervalMs: 250 });
    const leases = await bothLease();

    // HTTP: POST /sponsorship/request on one instance, then on both at once, in interleaved rounds (workers paused).
    stack.pauseWorker();
    process.kill(worker2.pid, "SIGSTOP");
    const data = await httpData(stack, settings.rounds * 3 * Math.max(15_000, settings.seconds * 3000));
    const post = (wallets: readonly string[]) => standardEndpoints({ ...data, freshRegisteredWallets: wallets }).find((e) => e.name === "sponsorship-request")!;
    // Disjoint wallets for each run of each round: every request is a new one (201), never a 409.
    const chunk = Math.floor(data.freshRegisteredWallets.length / (settings.rounds * 3));
    const wallets = (round: number, k: number) => data.freshRegisteredWallets.slice((round * 3 + k) * chunk, (round * 3 + k + 1) * chunk);
    const single: number[] = [];
    const double: [number, number][] = [];
    for (let round = 0; round < settings.rounds; round++) {
      const one = await runEndpoint(stack.url, post(wallets(round, 0)), {
        connections: settings.connections,
        seconds: settings.seconds,
        warmupSeconds: 1,
      });
      single.push(one.reqPerSec);
      const half = Math.max(1, Math.floor(settings.connections / 2));
      const [a, b] = await Promise.all(
        [stack.url, url2].map((url, k) => runEndpoint(url, post(wallets(round, 1 + k)), { connections: half, seconds: settings.seconds, warmupSeconds: 1 })),
      );
      double.push([a!.reqPerSec, b!.reqPerSec]);
    }
    await rejectOpenRequests(stack.databaseUrl!);
    process.kill(worker2.pid, "SIGCONT");
    stack.resumeWorker();

    // Pipeline: requests spread over both web servers, relayed by both workers.
    await bothLease();
    const pipeline = await measurePipeline({ ...common, baseUrls: [stack.url, url2], mode: "burst", concurrency: settings.burstConcurrency, cpu });
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    return {
      single: { postRequestPerSec: mean(single), pipelinePerSec: singlePipeline.completedPerSecond, pipeline: singlePipeline },
      double: {
        postRequestPerSec: mean(double.map(([a, b]) => a + b)),
        perInstance: [mean(double.map(([a]) => a)), mean(double.map(([, b]) => b))],
        pipelinePerSec: pipeline.completedPerSecond,
        pipeline,
      },
      relayerLeases: leases,
    };
  } finally {
    await Promise.all([web2.stop(), worker2.stop()]);
  }
}
