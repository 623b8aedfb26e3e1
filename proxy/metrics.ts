/**
 * What the proxy measures, as a small push interface: each answered harness request, each
 * recorded engine call (tokens in and out, the call's time, the time to the first token of a
 * stream) and each failure by kind. The proxy knows no metrics library; whoever runs it passes a
 * {@link ProxyMetricsSink} (`ProxyOptions.metrics`): the gateway registers one on its prom-client
 * registry (`metrics-prom.ts`), the standalone proxy on its own.
 *
 * @module
 */
import type { ApiType } from "./families";

/** One harness request on an inference route, once its answer is over. */
export interface RequestEvent {
  /** The API family the request was detected as. */
  api: ApiType;
  /** The HTTP status sent; 499 when the harness hung up before any answer went out. */
  status: number;
}

/** One engine call that became a completion record. */
export interface CompletionEvent {
  api: ApiType;
  /** Engine adapter name (`sglang`, `sglang-openai`, `vllm`). */
  engine: string;
  /** Prompt ids the engine was given. */
  promptTokens: number;
  /** Ids the engine sampled. */
  responseTokens: number;
  /** Prompt ids served from the engine's prefix cache; null when the engine did not say. */
  cachedTokens: number | null;
  /** The engine call's time (the record's `latency_ms`, in seconds). */
  callSeconds: number;
}

/**
 * Receives the proxy's measurements. Every method is called on the request path, so an
 * implementation must be cheap and must not throw.
 *
 * @example
 * ```ts
 * const seen: CompletionEvent[] = [];
 * const sink: ProxyMetricsSink = { ...NO_PROXY_METRICS, completion: (e) => seen.push(e) };
 * const proxy = await startProxy({ engine: "vllm", engineUrl, modelServed, metrics: sink });
 * ```
 */
export interface ProxyMetricsSink {
  request(e: RequestEvent): void;
  completion(e: CompletionEvent): void;
  /**
   * Time from sending a streamed engine call to its first generated token (only streamed calls
   * have one: a whole answer arrives at once).
   */
  firstToken(engine: string, seconds: number): void;
  /**
   * A call that failed, by kind: the error code the harness was answered with (`engine_timeout`,
   * `engine_unreachable`, `invalid_api_key`, …), `engine_aborted` for a stream cut by a
   * weight-update pause, `client_closed` when the harness hung up mid-call.
   */
  error(kind: string): void;
}

/**
 * A sink that drops everything (the default).
 *
 * @example
 * ```ts
 * const sink = opts.metrics ?? NO_PROXY_METRICS;
 * ```
 */
export const NO_PROXY_METRICS: ProxyMetricsSink = {
  request() {},
  completion() {},
  firstToken() {},
  error() {},
};
