/**
 * The proxy's measurements as Prometheus families on a prom-client registry: a
 * {@link ProxyMetricsSink} for the request path (requests, tokens, engine latency, errors) and
 * gauges read from the proxy's status on each scrape (the inference fence and the replicas). The
 * gateway registers them on its `/metrics`; `polar proxy` on its own `/metrics`. Both add
 * prom-client's process collectors ({@link registerProcessMetrics}).
 *
 * @module
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, type Metric, type Registry } from "prom-client";
import type { FenceStatus } from "./fence";
import type { CompletionEvent, ProxyMetricsSink, RequestEvent } from "./metrics";
import type { ReplicaStatus } from "./replicas";

/** Engine call time buckets (s): agent turns range from a short tool reply to a long generation. */
export const ENGINE_CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900];
/** Time-to-first-token buckets (s): prefill of a long agent context can take seconds. */
export const FIRST_TOKEN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** What the scrape-time gauges read: the proxy's `status()`, or the part of it they need. */
export type ProxyGaugeSource = () => FenceStatus & { replicas: ReplicaStatus[] };

/**
 * Prometheus families of a proxy. Construct it before the proxy (its sink goes into
 * `ProxyOptions.metrics`), then {@link PromProxyMetrics.register} it once the proxy runs.
 *
 * @example
 * ```ts
 * const proxyMetrics = new PromProxyMetrics();
 * const proxy = await startProxy({ ...opts, metrics: proxyMetrics });
 * proxyMetrics.register(registry, () => proxy.status());
 * // polar_proxy_requests_total{api="openai_chat",status="200"} 12
 * ```
 */
export class PromProxyMetrics implements ProxyMetricsSink {
  private readonly requests = new Counter({
    name: "polar_proxy_requests_total",
    help: "Harness requests on inference routes, by API family and HTTP status answered (499: the harness hung up first)",
    labelNames: ["api", "status"],
    registers: [],
  });
  private readonly promptTokens = new Counter({
    name: "polar_proxy_prompt_tokens_total",
    help: "Prompt token ids given to the engine in recorded calls, by API family",
    labelNames: ["api"],
    registers: [],
  });
  private readonly responseTokens = new Counter({
    name: "polar_proxy_response_tokens_total",
    help: "Token ids the engine sampled in recorded calls, by API family",
    labelNames: ["api"],
    registers: [],
  });
  private readonly cachedTokens = new Counter({
    name: "polar_proxy_cached_tokens_total",
    help: "Prompt token ids the engine served from its prefix cache, by API family",
    labelNames: ["api"],
    registers: [],
  });
  private readonly callSeconds = new Histogram({
    name: "polar_proxy_engine_call_seconds",
    help: "Engine time of each recorded call, request sent to answer complete, by engine",
    labelNames: ["engine"],
    buckets: ENGINE_CALL_BUCKETS,
    registers: [],
  });
  private readonly firstTokenSeconds = new Histogram({
    name: "polar_proxy_engine_first_token_seconds",
    help: "Time to first token of each streamed engine call (whole answers have none), by engine",
    labelNames: ["engine"],
    buckets: FIRST_TOKEN_BUCKETS,
    registers: [],
  });
  private readonly errors = new Counter({
    name: "polar_proxy_errors_total",
    help: "Failed harness calls by kind (the error code answered, engine_aborted, client_closed)",
    labelNames: ["kind"],
    registers: [],
  });

  request(e: RequestEvent): void {
    this.requests.inc({ api: e.api, status: String(e.status) });
  }

  completion(e: CompletionEvent): void {
    // inc(0) still creates the series, so a family that was measured shows a zero, not nothing.
    this.promptTokens.inc({ api: e.api }, e.promptTokens);
    this.responseTokens.inc({ api: e.api }, e.responseTokens);
    if (e.cachedTokens !== null) this.cachedTokens.inc({ api: e.api }, e.cachedTokens);
    this.callSeconds.observe({ engine: e.engine }, e.callSeconds);
  }

  firstToken(engine: string, seconds: number): void {
    this.firstTokenSeconds.observe({ engine }, seconds);
  }

  error(kind: string): void {
    this.errors.inc({ kind });
  }

  /** Registers the families on `registry`, with the fence and replica gauges read from `status`. */
  register(registry: Registry, status: ProxyGaugeSource): void {
    const families: Metric<string>[] = [
      this.requests,
      this.promptTokens,
      this.responseTokens,
      this.cachedTokens,
      this.callSeconds,
      this.firstTokenSeconds,
      this.errors,
    ];
    for (const m of families) registry.registerMetric(m);
    registerFenceGauges(registry, status);
  }
}

/** Gauges of the inference fence and the engine replicas, read on each scrape. */
function registerFenceGauges(registry: Registry, status: ProxyGaugeSource): void {
  new Gauge({
    name: "polar_proxy_paused",
    help: "1 while the inference fence is paused (a weight update): new calls wait",
    registers: [registry],
    collect() {
      this.set(status().paused ? 1 : 0);
    },
  });
  new Gauge({
    name: "polar_proxy_calls",
    help: "Engine calls now, by state (inflight: admitted; waiting: held by a pause)",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      const s = status();
      this.set({ state: "inflight" }, s.inflight);
      this.set({ state: "waiting" }, s.waiting);
    },
  });
  new Gauge({
    name: "polar_proxy_policy_version_info",
    help: "Always 1, labelled with the policy version stamped on newly admitted calls (no sample: none set)",
    labelNames: ["policy_version"],
    registers: [registry],
    collect() {
      // A changed version must not leave the old label behind as a second sample.
      this.reset();
      const v = status().policy_version;
      if (v !== null) this.set({ policy_version: v }, 1);
    },
  });
  new Counter({
    name: "polar_proxy_fence_aborted_calls_total",
    help: "Calls aborted at the engine by a pause in abort mode, and of those, re-issued after resume",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      // The fence's tally only grows; mirror it rather than count in parallel.
      const s = status();
      this.reset();
      this.inc({ outcome: "aborted" }, s.aborted_calls);
      this.inc({ outcome: "reissued" }, s.reissued_calls);
    },
  });
  new Gauge({
    name: "polar_proxy_replica_healthy",
    help: "1 while the engine replica takes calls (last health check or answer was good)",
    labelNames: ["replica"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of status().replicas) this.set({ replica: r.url }, r.healthy ? 1 : 0);
    },
  });
  new Gauge({
    name: "polar_proxy_replica_busy",
    help: "1 while the replica's last health probe timed out as it served calls (kept in, not failed over)",
    labelNames: ["replica"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of status().replicas) this.set({ replica: r.url }, r.busy ? 1 : 0);
    },
  });
  new Counter({
    name: "polar_proxy_replica_aborts_by_disconnect_total",
    help: "Aborts on the SGLang router itself, which has no /abort_request: stopped only by closing the call",
    labelNames: ["replica"],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of status().replicas)
        if (r.aborts === "disconnect") this.inc({ replica: r.url }, r.aborts_by_disconnect ?? 0);
    },
  });
}

/**
 * Gauges prom-client's default collectors name with a `_total` suffix, which the exposition
 * format reserves for counters (`promtool check metrics` refuses them). Each is the sum over
 * types of a family that stays (`nodejs_active_handles{type}`, …), so nothing is lost.
 */
const MISNAMED_DEFAULT_GAUGES = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

/**
 * prom-client's process and Node runtime families (CPU, memory, file descriptors, event loop
 * lag, GC, heap spaces, active handles) on `registry`, less {@link MISNAMED_DEFAULT_GAUGES}.
 *
 * @example
 * ```ts
 * registerProcessMetrics(registry); // process_cpu_user_seconds_total, nodejs_eventloop_lag_seconds, …
 * ```
 */
export function registerProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(name);
}
