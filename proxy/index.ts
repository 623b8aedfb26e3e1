/**
 * The recording proxy: a server speaking OpenAI Chat, OpenAI Responses, Anthropic Messages and
 * Google Gemini between harnesses and the inference engine replicas, capture of token-exact
 * completion records, weight-update fencing, and the trajectory builders that read the records.
 *
 * @module
 */

export { ABORT_REQUEST_TIMEOUT_MS, DEFAULT_POLICY_VERSION_WAIT_MS, HOLD_RECHECK_MS } from "./admission";
export * from "./builders";
export { DEFAULT_ENGINE_RETRY_MS } from "./call";
export {
  CaptureStore,
  COMPLETIONS_FILE,
  MAX_RECORDS_PER_SESSION,
  MAX_SESSION_CAPTURE_BYTES,
  newCompletionId,
  newSessionKey,
  type SessionOptions,
} from "./capture";
export {
  ENGINE_PRIORITY_SETTINGS,
  EnginePriorityError,
  type EnginePrioritySetting,
  type PriorityOrder,
} from "./engine-priority";
export {
  type ChatEngineName,
  ENGINE_NAMES,
  type EngineAdapter,
  type EngineName,
  engineAdapter,
  isTokenEngine,
  type NormalizedCompletion,
  VllmStreamAccumulator,
} from "./engines";
export {
  buildSglangChatRequest,
  normalizeSglangChatResponse,
  ROUTING_KEY_HEADER,
  validateChatRequest,
} from "./engines/sglang-openai";
export {
  DEFAULT_CONTEXT_LENGTH,
  MAX_BRIDGED_SESSIONS,
  pickTokenModeOptions,
  TOKEN_MODE_OPTION_KEYS,
  TokenMode,
  TokenModeConfigError,
  type TokenModeOptions,
} from "./engines/sglang-token/mode";
export { TOKEN_ENGINE_NAME } from "./engines/sglang-token/serve";
export { buildVllmChatRequest, normalizeVllmChatResponse } from "./engines/vllm";
export * from "./errors";
export { type ApiType, detectFamily, requestKey } from "./families";
export { type FenceStatus, InferenceFence, type PauseResult } from "./fence";
export {
  type CompletionEvent,
  NO_PROXY_METRICS,
  type ProxyMetricsSink,
  type RequestEvent,
} from "./metrics";
export {
  ENGINE_CALL_BUCKETS,
  FIRST_TOKEN_BUCKETS,
  PromProxyMetrics,
  registerProcessMetrics,
} from "./metrics-prom";
export { DEFAULT_HEALTH_INTERVAL_MS, ReplicaSet, type ReplicaStatus } from "./replicas";
export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  MAX_REQUEST_BODY_BYTES,
  type ProxyOptions,
  type ProxyStatus,
  type RecordingProxy,
  type RecordingProxy as Proxy,
  startProxy,
} from "./server";
