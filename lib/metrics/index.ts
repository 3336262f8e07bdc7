import type { IncomingMessage, ServerResponse } from "node:http";
import { createDatabase, type Database } from "@/db/client";
import { resolveDeployment } from "@/lib/chain/deployment";
import { getConfig, type Config } from "@/lib/config";
import { WEB_POOL_LIMITS } from "@/lib/http/app-context";
import type { Logger } from "@/lib/log";
import { createViemChainReader } from "./chain-reader";
import { serveMetricsRequest, startMetricsServer, type MetricsAuthorizer, type MetricsServer } from "./expose";
import { createHttpMetrics, instrumentHttpExchange, type HttpObservation } from "./http";
import { createPipelineMetrics, type RelayFailureKind, type RequestTimestamps } from "./pipeline";
import { createMetricsRegistry, type MetricsComponent } from "./registry";
import { registerServiceMetrics, type ServiceSources } from "./service";
import { metricsState, type WebMetrics, type WorkerMetrics } from "./state";

/** The process-wide metrics of the web server and of the worker, and the one-line hooks their code calls. */

export { createHttpMetrics, routeLabel, instrumentHttpExchange, type HttpMetrics, type HttpObservation } from "./http";
export { createPipelineMetrics, type PipelineMetrics, type RelayFailureKind, type RequestTimestamps } from "./pipeline";
export { registerServiceMetrics, type ChainReader, type ServiceSources } from "./service";
export { createViemChainReader } from "./chain-reader";
export { startMetricsServer, serveMetricsRequest, metricsResponse, isAdminBearer, type MetricsAuthorizer, type MetricsServer } from "./expose";
export { createMetricsRegistry, type MetricsComponent } from "./registry";
export type { WebMetrics, WorkerMetrics } from "./state";

/**
 * The service-wide collectors read through their own small pool (2 connections, opened at the first scrape),
 * so a scrape never waits behind the API's or the worker's queries, and through a batched JSON-RPC client.
 */
function defaultSources(config: Config = getConfig()): ServiceSources {
  if (!metricsState.sources) {
    if (!config.databaseUrl) throw new Error("DATABASE_URL is not set");
    // The web pool's limits (statement, lock, idle transaction, connect and answer timeouts): a scrape needs no more.
    const db: Database = createDatabase(config.databaseUrl, { max: 2, applicationName: "sponsorship-metrics", ...WEB_POOL_LIMITS });
    const deployment = resolveDeployment(config);
    metricsState.sources = {
      db,
      // The chain's id, so that an endpoint of another chain in RPC_URL is not read (chain-reader.ts).
      chain:
        config.rpcUrls.length > 0
          ? createViemChainReader(config.rpcUrls, { chainId: config.chainId ?? deployment?.chainId, batchSize: config.rpcBatchSize })
          : undefined,
      treasuryAddress: deployment?.treasuryAddress,
      sponsorAmountWei: config.sponsorAmountWei,
      budget: { perHour: config.sponsorBudgetPerHour, perDay: config.sponsorBudgetPerDay },
      treasuryLowSponsorships: config.treasuryLowSponsorships,
    };
  }
  return metricsState.sources;
}

/** The web server's registry: HTTP series, the service-wide series and Node's process metrics. */
export function getWebMetrics(): WebMetrics {
  if (!metricsState.web) {
    const registry = createMetricsRegistry("web");
    metricsState.web = { registry, http: createHttpMetrics(registry) };
    registerServiceMetrics(registry, { sources: () => defaultSources() });
  }
  return metricsState.web;
}

/** The worker's registry: relay and stage series, the service-wide series and Node's process metrics. */
export function getWorkerMetrics(): WorkerMetrics {
  if (!metricsState.worker) {
    const registry = createMetricsRegistry("worker");
    metricsState.worker = { registry, pipeline: createPipelineMetrics(registry) };
    registerServiceMetrics(registry, { sources: () => defaultSources() });
  }
  return metricsState.worker;
}

/* ------------------------------------------------------------ web hooks */

/** Call first thing in the Node request handler: observes route, method, status and latency when it ends. */
export function instrumentHttpRequest(req: IncomingMessage, res: ServerResponse): void {
  instrumentHttpExchange(getWebMetrics().http, req, res);
}

/** For handlers that time themselves. */
export function observeHttpRequest(observation: HttpObservation): void {
  getWebMetrics().http.observe(observation);
}

/**
 * `GET /metrics` on the web port behind `Authorization: Bearer <ADMIN_TOKEN>`; false for any other path. The web
 * server passes `authorize`: the sign-in's limiter and audit, so guesses here count like wrong sign-ins.
 */
export function serveWebMetrics(req: IncomingMessage, res: ServerResponse, logger?: Logger, authorize?: MetricsAuthorizer): Promise<boolean> {
  return serveMetricsRequest(getWebMetrics().registry, req, res, { adminToken: getConfig().adminToken, logger, authorize });
}

/* --------------------------------------------------------- worker hooks */

export function recordRelayAttempt(input: { relayer: string; attempt: number }): void {
  getWorkerMetrics().pipeline.recordRelayAttempt(input);
}

export function recordRelayFailure(input: { relayer: string; kind: RelayFailureKind }): void {
  getWorkerMetrics().pipeline.recordRelayFailure(input);
}

export function recordRelayConfirmed(input: { relayer: string }): void {
  getWorkerMetrics().pipeline.recordRelayConfirmed(input);
}

/** Call with the updated row when a request becomes completed, rejected or failed. */
export function observeRequestFinished(request: RequestTimestamps): void {
  getWorkerMetrics().pipeline.observeRequestFinished(request);
}

export function observeWorkerStep(input: { stage: string; seconds: number; items: number }): void {
  getWorkerMetrics().pipeline.observeWorkerStep(input);
}

export function observeFeeCeiling(input: { ceilingWei: bigint; baseFeeWei: bigint; aboveCeiling: boolean }): void {
  getWorkerMetrics().pipeline.observeFeeCeiling(input);
}

/* ------------------------------------------------------ loopback server */

/**
 * METRICS_PORT is the web server's loopback metrics port and METRICS_PORT + 1 the worker's, so both fit in
 * one variable on one host. Unset: no loopback server (the web's `/metrics` behind the credential remains).
 */
export function metricsPortFor(component: MetricsComponent, config: Config = getConfig()): number | undefined {
  if (config.metricsPort === undefined) return undefined;
  if (config.metricsPort === 0) return 0;
  return component === "web" ? config.metricsPort : config.metricsPort + 1;
}

/**
 * Starts this process's loopback metrics server when METRICS_PORT is set. A port already taken (a second
 * instance on the same host) is logged and skipped: metrics must never stop the service.
 */
export async function startProcessMetricsServer(component: MetricsComponent, logger?: Logger): Promise<MetricsServer | undefined> {
  const port = metricsPortFor(component);
  if (port === undefined) return undefined;
  const registry = component === "web" ? getWebMetrics().registry : getWorkerMetrics().registry;
  try {
    return await startMetricsServer(registry, port, { logger });
  } catch (error) {
    logger?.warn("metrics server not started", { port, error });
    return undefined;
  }
}
