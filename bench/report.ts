import { renderEndToEnd, type EndToEndResult } from "./end-to-end";
import { renderComparison, type TreeComparison } from "./compare";
import type { CeilingResult } from "./ceiling";
import type { ChainMemoryResult } from "./chain-memory";
import type { GrowthLevel } from "./growth";
import type { HttpResult } from "./http";
import type { PipelineResult } from "./pipeline";
import { round } from "./util";

/** The bench's results: one JSON document, rendered as a markdown table for the terminal and docs/performance.md. */

export type ChainRun = {
  blockTime: number;
  ceiling?: CeilingResult;
  burst?: PipelineResult;
  paced?: PipelineResult;
};

export type ScaleOutResult = {
  single: { postRequestPerSec: number; pipelinePerSec: number | null; pipeline?: PipelineResult };
  double: { postRequestPerSec: number; perInstance: number[]; pipelinePerSec: number | null; pipeline?: PipelineResult };
  relayerLeases: Record<string, number>;
};

export type BudgetResult = {
  withoutPerSec: number;
  withPerSec: number;
  ratio: number;
  rounds: { without: number[]; with: number[] };
  /** The check alone in the database with a day counted, µs per call, beside a `SELECT 1`. */
  checkMicros?: { check: number; select1: number };
  /** CPU ms (serving web server + PostgreSQL sessions) per created request. */
  cpuMsPerRequest?: { without: number; with: number; rounds: { without: number[]; with: number[] } };
};

export type Target = { name: string; target: string; value: string; met: boolean | null };

export type BenchReport = {
  startedAt: string;
  finishedAt?: string;
  machine: Record<string, string | number>;
  versions: Record<string, string>;
  settings: Record<string, string | number>;
  http?: HttpResult[];
  chains: ChainRun[];
  growth?: GrowthLevel[];
  scaleOut?: ScaleOutResult;
  budget?: BudgetResult;
  chainMemory?: ChainMemoryResult;
  compare?: TreeComparison;
  endToEnd?: EndToEndResult;
  targets: Target[];
  notes: string[];
};

export const f = (n: number | undefined | null, digits = 0) =>
  n === undefined || n === null || !Number.isFinite(n) ? "-" : round(n, digits).toLocaleString("en-US");
export const pct = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? "-" : `${round(n * 100, 0)}%`);

/** "web 1.2, postgres 0.8, ..." largest first. */
const cpu = (m: Record<string, number> | undefined) =>
  m
    ? Object.entries(m)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${round(v, 2)}`)
        .join(", ")
    : "-";

export function renderMarkdown(report: BenchReport): string {
  const out: string[] = [];
  out.push(`# Bench ${report.startedAt}`, "");
  out.push(
    Object.entries(report.machine)
      .map(([k, v]) => `${k}: ${v}`)
      .join("; "),
    "",
  );
  out.push(
    Object.entries(report.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(", "),
    "",
  );
  out.push(
    Object.entries(report.settings)
      .map(([k, v]) => `${k}=${v}`)
      .join(" "),
    "",
  );

  if (report.http?.length) {
    out.push(
      "## HTTP",
      "",
      "| endpoint | req/s | vs /health | p50 ms | p90 ms | p99 ms | CPU ms per request | statuses | errors |",
      "|---|---:|---:|---:|---:|---:|---|---|---:|",
    );
    for (const h of report.http) {
      const statuses = Object.entries(h.statusCounts)
        .map(([k, v]) => `${k}: ${v}`)
        .join(", ");
      out.push(
        `| ${h.method} ${h.path} | ${f(h.reqPerSec)} | ${pct(h.ratioToHealth)} | ${f(h.latencyMs.p50)} | ${f(h.latencyMs.p90)} | ${f(h.latencyMs.p99)} | ${cpu(h.cpuMsPerRequest)} | ${statuses} | ${h.errors} |`,
      );
    }
    out.push("");
  }

  for (const c of report.chains) {
    out.push(`## Pipeline and chain, LOCAL_BLOCK_TIME=${c.blockTime}`, "");
    if (c.ceiling) {
      const x = c.ceiling;
      out.push(
        `Chain ceiling: ${f(x.perSecond)} sponsor calls/s for a burst of ${x.transactions}${c.blockTime > 0 ? `, ${f(x.maxPerBlock / c.blockTime)}/s steady state (a full block every ${c.blockTime} s)` : ""} (${x.transactions} transactions from ${x.relayers} accounts, sent in ${f(x.sendSeconds, 2)} s, all mined after ${f(x.totalSeconds, 2)} s over ${x.blocks} blocks, at most ${x.maxPerBlock} in one block; ${x.sponsoredEvents} Sponsored events). Gas per sponsorship ${f(x.gasPerSponsorship.mean)} (min ${f(x.gasPerSponsorship.min)}, max ${f(x.gasPerSponsorship.max)}).`,
        "",
      );
    }
    const runs = [c.burst, c.paced].filter((r): r is PipelineResult => r !== undefined);
    if (runs.length) {
      out.push(
        "| run | requests | offered/s | completed/s | % of ceiling | p50 ms | p95 ms | p99 ms | stage p50 review/queue/confirm ms | statuses | attempts | Sponsored events | paid twice | CPU ms per request |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|",
      );
      for (const r of runs) {
        const share = c.ceiling ? r.completedPerSecond / c.ceiling.perSecond : undefined;
        out.push(
          `| ${r.mode} | ${r.requests} | ${r.offeredPerSecond ?? `all at once (${r.concurrency ?? "?"} in flight)`} | ${f(r.completedPerSecond)} | ${pct(share)} | ${f(r.latencyMs.p50)} | ${f(r.latencyMs.p95)} | ${f(r.latencyMs.p99)} | ${f(r.stageMsP50.review)} / ${f(r.stageMsP50.queue)} / ${f(r.stageMsP50.confirm)} | ${Object.entries(
            r.statuses,
          )
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")} | ${r.relayAttempts.total} | ${r.onChain.sponsoredEvents} | ${r.onChain.walletsPaidTwice} | ${cpu(r.cpuMsPerRequest)} |`,
        );
      }
      const gas = runs.find((r) => r.gasUsed)?.gasUsed;
      if (gas) out.push("", `Gas per sponsorship through the service (receipts): mean ${f(gas.mean)}, min ${f(gas.min)}, max ${f(gas.max)}.`);
      out.push("");
    }
  }

  if (report.growth?.length) {
    out.push(
      "## Growth (read latency with the tables seeded)",
      "",
      "| requests in table | endpoint | req/s | p50 ms | p99 ms | statuses |",
      "|---:|---|---:|---:|---:|---|",
    );
    for (const g of report.growth) {
      for (const r of g.reads) {
        out.push(
          `| ${f(g.rows)} | ${r.method} ${r.path} | ${f(r.reqPerSec)} | ${f(r.latencyMs.p50)} | ${f(r.latencyMs.p99)} | ${Object.entries(r.statusCounts)
            .map(([k, v]) => `${k}: ${v}`)
            .join(", ")} |`,
        );
      }
    }
    out.push("", "Database time per statement (prepared, one connection, 2,000 different rows), ms p50 / p99:", "");
    const names = report.growth[0]!.queryMs.map((q) => q.name);
    out.push(`| statement | ${report.growth.map((g) => f(g.rows)).join(" | ")} |`, `|---|${report.growth.map(() => "---:").join("|")}|`);
    for (const name of names) {
      out.push(
        `| ${name} | ${report.growth
          .map((g) => {
            const q = g.queryMs.find((x) => x.name === name);
            return q ? `${q.p50} / ${q.p99}` : "-";
          })
          .join(" | ")} |`,
      );
    }
    const last = report.growth[report.growth.length - 1]!;
    out.push("", `Query plans at ${f(last.rows)} requests (EXPLAIN (ANALYZE, BUFFERS) of the SQL the endpoints run):`, "");
    for (const p of last.plans) {
      out.push(`### ${p.name}${p.seqScans.length ? ` (sequential scan on ${p.seqScans.join(", ")})` : ""}`, "", "```", p.plan, "```", "");
    }
  }

  if (report.scaleOut) {
    const s = report.scaleOut;
    out.push(
      "## Scale-out (two web servers and two workers on one PostgreSQL)",
      "",
      "| | 1 web + 1 worker | 2 web + 2 workers |",
      "|---|---:|---:|",
      `| POST /sponsorship/request req/s | ${f(s.single.postRequestPerSec)} | ${f(s.double.postRequestPerSec)} (${s.double.perInstance.map((n) => f(n)).join(" + ")}) |`,
      `| pipeline completed/s (burst) | ${f(s.single.pipelinePerSec)} | ${f(s.double.pipelinePerSec)} |`,
      `| pipeline p50 / p95 ms | ${f(s.single.pipeline?.latencyMs.p50)} / ${f(s.single.pipeline?.latencyMs.p95)} | ${f(s.double.pipeline?.latencyMs.p50)} / ${f(s.double.pipeline?.latencyMs.p95)} |`,
      `| pipeline CPU ms per request | ${cpu(s.single.pipeline?.cpuMsPerRequest)} | ${cpu(s.double.pipeline?.cpuMsPerRequest)} |`,
      "",
      `Relayer leases during the two-worker run: ${Object.entries(s.relayerLeases)
        .map(([k, v]) => `${k}: ${v}`)
        .join(", ")}.`,
      "",
    );
  }

  if (report.endToEnd) out.push(renderEndToEnd(report.endToEnd));
  if (report.compare) out.push(renderComparison(report.compare));

  if (report.chainMemory) {
    const m = report.chainMemory;
    out.push(
      `## Local chain memory (anvil as npm start runs it, ${m.blockTime}-s blocks)`,
      "",
      "| | anvil RSS MiB |",
      "|---|---:|",
      `| after deployment | ${f(m.rssMiB.before, 1)} |`,
      ...m.rssMiB.samples.map((x) => `| after ${f(x.transactions)} sponsor calls | ${f(x.rss, 1)} |`),
      `| all ${f(m.transactions)} mined (${m.blocks} blocks, ${f(m.seconds)} s at ${m.rate}/s) | ${f(m.rssMiB.after, 1)} |`,
      `| after ${f(m.idleSeconds)} s more of empty blocks | ${f(m.rssMiB.idle, 1)} |`,
      `| after a restart from the persisted state | ${f(m.rssMiB.afterRestart, 1)} |`,
      "",
      `State file ${f(m.stateFileMiB, 1)} MiB; the restart ${m.restartKeptDeployment ? "kept" : "did **not** keep"} the deployment and the chain.`,
      "",
    );
  }

  if (report.targets.length) {
    out.push("## Targets", "", "| target | wanted | measured | met |", "|---|---|---|---|");
    for (const t of report.targets) out.push(`| ${t.name} | ${t.target} | ${t.value} | ${t.met === null ? "-" : t.met ? "yes" : "**no**"} |`);
    out.push("");
  }
  if (report.budget) {
    const b = report.budget;
    out.push(
      "## Global budget (POST /sponsorship/request, one instance at a time)",
      "",
      "| | req/s (mean of rounds) | rounds |",
      "|---|---:|---|",
      `| no budget | ${b.withoutPerSec.toFixed(0)} | ${b.rounds.without.map((r) => r.toFixed(0)).join(", ")} |`,
      `| budget set | ${b.withPerSec.toFixed(0)} | ${b.rounds.with.map((r) => r.toFixed(0)).join(", ")} |`,
      "",
      `With a budget: ${(b.ratio * 100).toFixed(1)}% of the rate without.`,
      "",
    );
    if (b.checkMicros) {
      out.push(
        `The check alone, in the database with a whole day counted on every shard: ${b.checkMicros.check.toFixed(0)} µs per call (a PL/pgSQL \`SELECT\` of nothing: ${b.checkMicros.select1.toFixed(0)} µs).`,
        "",
      );
    }
    if (b.cpuMsPerRequest) {
      const c = b.cpuMsPerRequest;
      out.push(
        "| | CPU ms per request (web + PostgreSQL sessions) | rounds |",
        "|---|---:|---|",
        `| no budget | ${c.without.toFixed(2)} | ${c.rounds.without.map((r) => r.toFixed(2)).join(", ")} |`,
        `| budget set | ${c.with.toFixed(2)} | ${c.rounds.with.map((r) => r.toFixed(2)).join(", ")} |`,
        "",
        `With a budget: ${((c.with / c.without) * 100).toFixed(1)}% of the CPU per request without.`,
        "",
      );
    }
  }
  if (report.notes.length) out.push("## Notes", "", ...report.notes.map((n) => `- ${n}`), "");
  return out.join("\n");
}
