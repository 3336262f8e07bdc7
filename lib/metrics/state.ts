import type { ServiceSources } from "./service";
import type { HttpMetrics } from "./http";
import type { PipelineMetrics } from "./pipeline";
import type { Registry } from "prom-client";

/**
 * The process-wide metrics state. It hangs off `globalThis`: Next.js bundles route handlers separately from
 * server.ts, so a module-level variable could exist twice in the web process, and the series observed in one copy
 * would be missing from the other's `/metrics`. This module imports nothing at run time, so code that only counts
 * (the problem renderer) can reach the registry without loading prom-client or the database.
 */

export type WebMetrics = { registry: Registry; http: HttpMetrics };
export type WorkerMetrics = { registry: Registry; pipeline: PipelineMetrics };

type State = { web?: WebMetrics; worker?: WorkerMetrics; sources?: ServiceSources };
const KEY = Symbol.for("gas-sponsorship.metrics");

export const metricsState = ((globalThis as Record<symbol, unknown>)[KEY] ??= {}) as State;

/**
 * Counts a problem answer by its code in the web server's registry (`http_problems_total`). A process without web
 * metrics (the worker, a test calling a route handler directly) counts nothing: server.ts creates them with its first
 * request, before any answer.
 */
export function countProblem(code: string): void {
  metricsState.web?.http.problem(code);
}
