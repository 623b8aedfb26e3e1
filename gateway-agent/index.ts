/**
 * The gateway agent of a GPU host: dials the control plane, runs assigned sessions through the
 * staged pipeline (INIT → READY → RUN → POST_RUN) with a recording proxy in front of the engine.
 *
 * @module
 */
export * from "./artifacts";
export {
  ControlConnection,
  type ControlConnectionOptions,
  connectUrl,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_RECONNECT,
  FATAL_CLOSE_CODES,
  type ReconnectPolicy,
} from "./connection";
export {
  ControlPlaneHttp,
  ControlPlaneRequestError,
  DEFAULT_REQUEST_TIMEOUTS,
  type RequestTimeouts,
  timeoutForBytes,
} from "./control-http";
export {
  consoleLogger,
  type GatewayLogger,
  GatewayRefusedError,
  SessionFailure,
  SessionInterrupt,
  type TimeoutInfo,
} from "./errors";
export * from "./evaluator";
export { DEFAULT_KEEP_FAILED_SESSIONS, FailedSessionKeeper } from "./failed-sessions";
export { AGENT_VERSION, type Gateway, type GatewayOptions, type GatewayStats, startGateway } from "./gateway";
export * from "./harness";
export { GatewayMetrics, startGatewayHttp } from "./http-server";
export { JournalEntry, ResultJournal } from "./journal";
export { jsonLogger } from "./logger";
export { agentTimeoutMs, runSessionPipeline } from "./pipeline";
export { DEFAULT_JOURNAL_MAX_BYTES, ResultDelivery, type ResultDeliveryOptions } from "./result-delivery";
export * from "./runtime";
export { Semaphore } from "./semaphore";
export {
  type AdminControls,
  type RunnerStats,
  SessionRunner,
  type SessionRunnerOptions,
} from "./session-runner";
export { StagePools } from "./stage-pools";
