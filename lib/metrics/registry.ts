import { collectDefaultMetrics, Registry } from "prom-client";

/** Which process a registry describes; becomes the `component` label of every series. */
export type MetricsComponent = "web" | "worker";

/**
 * A fresh registry for one process: Node's default process metrics (CPU, memory, event-loop lag, GC) plus the
 * `component` label, so the web server's and the worker's series never collide in one Prometheus.
 */
export function createMetricsRegistry(component: MetricsComponent, options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ component });
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return registry;
}
