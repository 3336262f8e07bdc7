/** The bench's settings, from the environment (listed in bench/run.ts's header and docs/performance.md). */

export const env = process.env;
export const int = (v: string | undefined, d: number) => (v && /^\d+$/.test(v) ? Number(v) : d);
export const settings = {
  phases: (env.BENCH_PHASES ?? "http,budget,pipeline1,e2e,pipeline0,growth,scaleout,chainmemory").split(",").map((s) => s.trim()),
  requests: int(env.BENCH_REQUESTS, 1000),
  pacedRate: int(env.BENCH_PACED_RATE, 200),
  seconds: int(env.BENCH_SECONDS, 5),
  rounds: int(env.BENCH_ROUNDS, 3),
  connections: int(env.BENCH_CONNECTIONS, 32),
  /** Requests in flight in the pipeline's "all at once" run (the ceiling sends its 1,000 up front). */
  burstConcurrency: int(env.BENCH_BURST_CONCURRENCY, 256),
  growth: (env.BENCH_GROWTH ?? "1000,100000,1000000")
    .split(",")
    .map(Number)
    .filter((n) => n > 0),
  ceilingRelayers: int(env.BENCH_CEILING_RELAYERS, 4),
  chainMemory: (() => {
    const [transactions, rate, idleSeconds] = (env.BENCH_CHAIN_MEMORY ?? "3000,30,60").split(",").map((v) => int(v.trim(), -1));
    return { transactions: transactions! > 0 ? transactions! : 3000, rate: rate! > 0 ? rate! : 30, idleSeconds: idleSeconds! >= 0 ? idleSeconds! : 60 };
  })(),
};
export const has = (phase: string) => settings.phases.includes(phase);
