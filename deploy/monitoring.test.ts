import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { createHttpMetrics } from "@/lib/metrics/http";
import { createPipelineMetrics } from "@/lib/metrics/pipeline";
import { createMetricsRegistry } from "@/lib/metrics/registry";
import { registerServiceMetrics } from "@/lib/metrics/service";

/**
 * The monitoring shipped in deploy/ (issue 12, item 7): the Grafana dashboard is valid JSON whose every query uses
 * series this service exports, the Prometheus alert rules use them too, and `promtool check rules` accepts the
 * rules (when promtool is installed; .ci/run installs Debian's prometheus package for it).
 */

const DEPLOY = import.meta.dirname;
const ALERTS = path.join(DEPLOY, "prometheus", "alerts.yml");
const DASHBOARD = path.join(DEPLOY, "grafana", "dashboard.json");

/** Series another piece of work adds (the global budget of "Abuse control"), allowed in alert rules before it lands. */
const ADDED_ELSEWHERE = new Set<string>();

/** Every series name the web server and the worker can export (as Prometheus sees them: histograms' suffixes too). */
function exportedSeries(): Set<string> {
  const names = new Set<string>();
  for (const component of ["web", "worker"] as const) {
    const registry = createMetricsRegistry(component);
    if (component === "web") createHttpMetrics(registry);
    else createPipelineMetrics(registry);
    registerServiceMetrics(registry, { sources: () => ({}) as never });
    for (const metric of registry.getMetricsAsArray()) {
      const { name, type } = metric as unknown as { name: string; type: string };
      names.add(name);
      if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) names.add(name + suffix);
      if (type === "summary") for (const suffix of ["_sum", "_count"]) names.add(name + suffix);
    }
  }
  return names;
}

/** The series a PromQL expression reads (this service's prefixes; label names and functions never match them). */
function seriesIn(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  return [...withoutStrings.matchAll(/\b(?:sponsorship|http|process|nodejs)_[a-zA-Z0-9_]+/g)].map((m) => m[0]);
}

type Panel = { title?: string; type: string; targets?: { expr?: string }[]; panels?: Panel[] };

function dashboardQueries(): { panel: string; expr: string }[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as { panels: Panel[] };
  const all = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  return all.flatMap((p) => (p.targets ?? []).filter((t) => t.expr).map((t) => ({ panel: p.title ?? "", expr: t.expr! })));
}

/** The `expr` of every rule in the alerts file (single-line, or a `|` block). */
function alertExpressions(): string[] {
  const lines = readFileSync(ALERTS, "utf8").split("\n");
  const exprs: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\s*)expr:\s*(.*)$/.exec(lines[i]!);
    if (!m) continue;
    if (m[2] !== "|" && m[2] !== ">") {
      exprs.push(m[2]!);
      continue;
    }
    const block: string[] = [];
    while (i + 1 < lines.length && (lines[i + 1]!.trim() === "" || lines[i + 1]!.search(/\S/) > m[1]!.length)) block.push(lines[++i]!.trim());
    exprs.push(block.join(" ").trim());
  }
  return exprs;
}

describe("deploy/grafana/dashboard.json", () => {
  it("queries only series the service exports", () => {
    const exported = exportedSeries();
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThan(10);
    const unknown = queries.flatMap((q) =>
      seriesIn(q.expr)
        .filter((s) => !exported.has(s))
        .map((s) => `${q.panel}: ${s}`),
    );
    expect(unknown).toEqual([]);
    // Every query reads at least one of our series.
    expect(queries.filter((q) => seriesIn(q.expr).length === 0)).toEqual([]);
  });
});

describe("deploy/prometheus/alerts.yml", () => {
  it("alerts on series the service exports (and the budget series of the abuse-control work)", () => {
    const exported = exportedSeries();
    const exprs = alertExpressions();
    expect(exprs.length).toBeGreaterThanOrEqual(10);
    const unknown = exprs.flatMap((e) => seriesIn(e).filter((s) => !exported.has(s) && !ADDED_ELSEWHERE.has(s)));
    expect(unknown).toEqual([]);
    const used = new Set(exprs.flatMap(seriesIn));
    for (const series of [
      "sponsorship_fees_above_ceiling",
      "sponsorship_budget_remaining",
      "sponsorship_treasury_sponsorships_left",
      "sponsorship_worker_heartbeat_age_seconds",
    ]) {
      expect(used.has(series), series).toBe(true);
    }
  });

  const promtool = spawnSync("promtool", ["--version"], { encoding: "utf8" });
  it.skipIf(promtool.error !== undefined || promtool.status !== 0)("passes `promtool check rules`", () => {
    const check = spawnSync("promtool", ["check", "rules", ALERTS], { encoding: "utf8" });
    expect(check.stderr + check.stdout).toContain("SUCCESS");
    expect(check.status).toBe(0);
  });
});
