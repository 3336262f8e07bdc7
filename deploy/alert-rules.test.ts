import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The alert rules of deploy/prometheus/alerts.yml evaluated by Prometheus's own engine: each file in
 * deploy/prometheus/tests is a `promtool test rules` suite (input series, the alerts expected at given times, with
 * their labels and rendered annotations). Skipped where promtool is not installed (.ci/run installs it).
 */

const TESTS = path.join(import.meta.dirname, "prometheus", "tests");
const promtool = spawnSync("promtool", ["--version"], { encoding: "utf8" });
const suites = readdirSync(TESTS).filter((f) => f.endsWith(".yml"));

describe.skipIf(promtool.error !== undefined || promtool.status !== 0)("deploy/prometheus/alerts.yml under `promtool test rules`", () => {
  it("has rule tests", () => {
    expect(suites.length).toBeGreaterThan(0);
  });

  // worker-heartbeat.yml: SponsorshipWorkerStale does not fire while a fresh worker beats beside a crashed one's
  // stale series, and fires when the freshest heartbeat is stale; SponsorshipWorkerSilent names the dead worker.
  // treasury-low.yml: SponsorshipTreasuryLow fires at TREASURY_LOW_SPONSORSHIPS as exported (the `treasury.low`
  // webhook's threshold), at its default 100 when it is not, and never with 0.
  // http-errors.yml: SponsorshipHttpServerErrors does not fire for the 503s of a pause (counted by problem code,
  // http_problems_total), during it or after the resume, and fires for an outage's 503s on the same route, during a
  // pause too, and for other routes' 503s in one.
  it.each(suites)("%s: every expected alert fires, and no other", (suite) => {
    const run = spawnSync("promtool", ["test", "rules", suite], { cwd: TESTS, encoding: "utf8" });
    expect(run.stdout + run.stderr).toContain("SUCCESS");
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});
