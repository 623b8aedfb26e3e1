/**
 * The recording proxy: OpenAI-compatible server between harnesses and the inference engine,
 * capture of token-exact completion records, and the trajectory builders that read them.
 *
 * @module
 */
export * from "./builders";
export { CaptureStore, MAX_RECORDS_PER_SESSION, newCompletionId, newSessionKey } from "./capture";
export { type EngineAdapter, type EngineName, engineAdapter, type NormalizedCompletion } from "./engines";
export {
  buildSglangChatRequest,
  normalizeSglangChatResponse,
  ROUTING_KEY_HEADER,
  validateChatRequest,
} from "./engines/sglang-openai";
export * from "./errors";
export { completionToSseEvents, toClientCompletion } from "./openai-chat";
export {
  DEFAULT_REQUEST_TIMEOUT_MS,
  MAX_REQUEST_BODY_BYTES,
  type ProxyLogger,
  type ProxyOptions,
  type RecordingProxy,
  type RecordingProxy as Proxy,
  startProxy,
} from "./server";
