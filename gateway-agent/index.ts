/**
 * The gateway agent of a GPU host: dials the control plane, runs assigned sessions through the
 * staged pipeline (INIT → READY → RUN → POST_RUN) with a recording proxy in front of the engine.
 *
 * @module
 */
export {
  ControlConnection,
  type ControlConnectionOptions,
  connectUrl,
  DEFAULT_RECONNECT,
  type ReconnectPolicy,
} from "./connection";
export { consoleLogger, type GatewayLogger, SessionFailure, SessionInterrupt } from "./errors";
export { type EvalOutcome, type Evaluator, resolveEvaluator, sessionCompleted } from "./evaluator";
export { AGENT_VERSION, type Gateway, type GatewayOptions, type GatewayStats, startGateway } from "./gateway";
export { baseEnv, INHERITED_ENV, renderShellCommand, resolveHarness, SUPPORTED_HARNESSES } from "./harness";
export { type CommandResult, LocalRuntime } from "./runtime/local";
export { Semaphore } from "./semaphore";
export { type RunnerStats, SessionRunner, type SessionRunnerOptions } from "./session-runner";
