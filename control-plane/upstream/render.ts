/**
 * Polar-TS results in upstream Polar's shapes, for `/rollout/*` answers and the callbacks of tasks
 * submitted there. Polar-TS's own API keeps its structure; only this rendering changes, and what
 * upstream's models have no field for moves to `metadata.polar_ts`:
 *
 * - `timing`: upstream's `SessionTiming` forbids extra keys (the release's four fields, newer
 *   releases ~40), so only the four both know are sent; the full timing is `metadata.polar_ts.timing`.
 * - `error`: upstream's is a string (the message); `{kind, message}` is `metadata.polar_ts.error`.
 * - `CANCELLED` (upstream has no such session status) becomes `ERROR`, as upstream's gateway reports
 *   a cancelled session; the native status is `metadata.polar_ts.status`.
 * - Not-completed trajectories are marked as upstream's gateway marks them (fail closed: reward 0,
 *   loss mask 0, `training_filter` on each trace), except an agent-budget timeout in `exec` whose
 *   traces are aligned: it stays trainable as a zero-reward negative.
 * - `agent_result` takes upstream's form `{status: completed|failed|timeout, return_code, error?,
 *   timeout_source?, timeout_stage?}`; Polar-TS's own is `polar_agent_result`.
 * - A `policy_version: null` in trace or trajectory metadata is dropped: upstream's bridge merges
 *   metadata and a null would override the task's version.
 * - Early-stop stragglers carry upstream's cancellation keys in result and trajectory metadata.
 * - Results come in session (sample) order, not completion order.
 *
 * @module
 */
import type { BatchStatusBody, SessionResult, Trace, Trajectory } from "../../protocol";
import { parseSessionId } from "../ids";

/** Batch ids of upstream tasks start with this (every run of a task id: see `runs.ts`). */
export const ROLLOUT_PREFIX = "rollout:";

/**
 * True for the batch of an upstream task (submitted on `/rollout/*`).
 *
 * @example
 * ```ts
 * isRolloutBatch("rollout:t1"); // true
 * ```
 */
export function isRolloutBatch(batchId: string): boolean {
  return batchId.startsWith(ROLLOUT_PREFIX);
}

/** Upstream's task states. */
export type RolloutState = "cancelled" | "running" | "completed" | "failed";

/**
 * Upstream's task state of a batch: `cancelled`, `running`, `completed`, or `failed` when it
 * finished and any session ended with a `configuration` error (upstream's `failed` means the task
 * itself could not run; such a group is also not a full group to train on).
 *
 * @example
 * ```ts
 * rolloutState(await stub.status()); // "completed"
 * ```
 */
export function rolloutState(status: BatchStatusBody): RolloutState {
  if (status.cancelled_at) return "cancelled";
  if (status.status !== "completed") return "running";
  return status.errors.configuration > 0 ? "failed" : "completed";
}

/** Upstream's `SessionTiming` fields that both its release and newer versions accept. */
export interface UpstreamTiming {
  register_to_init_queue_ms: number;
  init_ms: number;
  run_ms: number;
  postrun_ms: number;
}

/** Upstream's `SessionResult`, plus the Polar-TS keys it ignores (`batch_id`, `reward`, `attempt`). */
export interface UpstreamSessionResult {
  session_id: string;
  task_id: string;
  batch_id: string;
  status: "COMPLETED" | "ERROR" | "TIMEOUT";
  reward: number | null;
  trajectory: Trajectory;
  timing: UpstreamTiming;
  node_id: string | null;
  attempt: number;
  error: string | null;
  metadata: Record<string, unknown>;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Metadata without a null `policy_version` (a null would override the task's version upstream). */
function withoutNullVersion(metadata: Json): Json {
  if (!("policy_version" in metadata) || metadata.policy_version !== null) return metadata;
  const { policy_version: _dropped, ...rest } = metadata;
  return rest;
}

/**
 * Upstream's `agent_result` from Polar-TS's harness outcome and timeout classification: an
 * interrupted run is a `timeout` when a budget ended it, else `failed`.
 */
function upstreamAgentResult(native: Json, metadata: Json, error: string | null): Json {
  const source = metadata.timeout_source;
  const stage = metadata.timeout_stage;
  const timedOut = source === "agent" || source === "session";
  const status =
    native.status === "interrupted" ? (timedOut ? "timeout" : "failed") : String(native.status ?? "failed");
  const out: Json = { status, return_code: typeof native.exitCode === "number" ? native.exitCode : null };
  if (status !== "completed" && error) out.error = error;
  if (timedOut) out.timeout_source = source;
  if (stage === "setup" || stage === "exec" || stage === "postprocess") out.timeout_stage = stage;
  return out;
}

/** Upstream's rule: a timeout of the agent's own budget while it executed, not of the verifier. */
function trainableAgentTimeout(result: SessionResult, metadata: Json): boolean {
  const agent = metadata.agent_result;
  const evaluation = metadata.evaluation;
  return (
    result.status === "TIMEOUT" &&
    result.trajectory.status === "TIMEOUT" &&
    isObject(agent) &&
    agent.status === "timeout" &&
    agent.timeout_source === "agent" &&
    agent.timeout_stage === "exec" &&
    !(isObject(evaluation) && evaluation.verifier_timeout === true)
  );
}

/** Every sampled token of the trace has its mask and finite logprob: it can be trained on. */
function aligned(trace: Trace): boolean {
  const n = trace.response_ids.length;
  return (
    n > 0 &&
    trace.loss_mask.length === n &&
    trace.loss_mask.some((m) => m === 1) &&
    trace.response_logprobs !== null &&
    trace.response_logprobs.length === n &&
    trace.response_logprobs.every(Number.isFinite)
  );
}

/**
 * Fail-closed marking of a trajectory that did not complete (upstream's gateway does it before
 * the trainer sees it): every trace gets reward 0 and a `training_filter`, and a zero loss mask
 * unless it is an aligned trace of a trainable agent timeout.
 */
function markNotCompleted(
  result: SessionResult,
  traces: Trace[],
  metadata: Json,
): { traces: Trace[]; metadata: Json } {
  const trainable = trainableAgentTimeout(result, metadata);
  const reason = trainable
    ? "agent_timeout"
    : result.trajectory.status === "TIMEOUT"
      ? "session_timeout"
      : "session_error";
  const detail = result.trajectory.error ?? result.trajectory.status;
  const marked = traces.map((trace): Trace => {
    const keep = trainable && aligned(trace);
    const previous = isObject(trace.metadata.training_filter) ? trace.metadata.training_filter : {};
    const filter: Json = {
      original_reward: trace.reward,
      ...previous,
      masked: !keep,
      reason: keep || !trainable ? reason : "agent_timeout_unaligned",
      detail,
      ...(trainable ? { trainable: keep } : {}),
    };
    return {
      ...trace,
      reward: 0,
      loss_mask: keep ? trace.loss_mask : trace.loss_mask.map(() => 0),
      metadata: { ...trace.metadata, training_filter: filter },
    };
  });
  if (!isObject(metadata.evaluation)) return { traces: marked, metadata };
  const evaluation = { ...metadata.evaluation };
  const traceRewards = evaluation.trace_rewards;
  if (evaluation.outcome_reward != null) evaluation.discarded_outcome_reward ??= evaluation.outcome_reward;
  if (traceRewards != null) evaluation.discarded_trace_rewards ??= traceRewards;
  evaluation.outcome_reward = 0;
  if (Array.isArray(traceRewards)) evaluation.trace_rewards = traceRewards.map(() => 0);
  evaluation.reward_discarded = true;
  evaluation.reward_discard_reason = reason;
  return { traces: marked, metadata: { ...metadata, evaluation } };
}

/** Upstream's keys on an early-stop straggler (Polar-TS's ledger sets the first four). */
function earlyStopKeys(result: SessionResult): Json | null {
  if (result.metadata.early_stop_cancelled !== true) return null;
  const keys: Json = {
    early_stop_cancelled: true,
    fully_masked: true,
    early_stop_reason: "minimum_usable_sessions_reached",
    early_stop_elapsed_ms: result.timing.total_ms,
  };
  for (const k of ["early_stop_min_usable_sessions", "early_stop_usable_sessions"]) {
    if (k in result.metadata) keys[k] = result.metadata[k];
  }
  return keys;
}

/**
 * One Polar-TS session result in upstream's `SessionResult` shape (see the module comment).
 *
 * @example
 * ```ts
 * const up = upstreamSessionResult(result); // up.timing has exactly the four upstream fields
 * ```
 */
export function upstreamSessionResult(result: SessionResult): UpstreamSessionResult {
  const error = result.error?.message ?? null;
  let metadata = withoutNullVersion({ ...result.trajectory.metadata });
  if (isObject(metadata.agent_result)) {
    metadata.polar_agent_result = metadata.agent_result;
    metadata.agent_result = upstreamAgentResult(metadata.agent_result, metadata, error);
  }
  const earlyStop = earlyStopKeys(result);
  if (earlyStop) metadata = { ...metadata, ...earlyStop };
  let traces = result.trajectory.traces.map((t) => ({ ...t, metadata: withoutNullVersion(t.metadata) }));
  if (result.trajectory.status !== "COMPLETED")
    ({ traces, metadata } = markNotCompleted(result, traces, metadata));
  return {
    session_id: result.session_id,
    task_id: result.task_id,
    batch_id: result.batch_id,
    status: result.status === "CANCELLED" ? "ERROR" : result.status,
    reward: result.reward,
    trajectory: { ...result.trajectory, traces, metadata },
    timing: {
      register_to_init_queue_ms: result.timing.queued_ms,
      init_ms: result.timing.init_ms,
      run_ms: result.timing.run_ms,
      postrun_ms: result.timing.postrun_ms,
    },
    node_id: result.node_id,
    attempt: result.attempt,
    error,
    metadata: {
      ...result.metadata,
      ...(earlyStop ?? {}),
      polar_ts: { status: result.status, error: result.error, timing: result.timing },
    },
  };
}

/**
 * Results sorted by task, then sample index (upstream returns a task's sessions in that order).
 *
 * @example
 * ```ts
 * inSessionOrder([r1, r0]); // [r0, r1]
 * ```
 */
export function inSessionOrder<T extends { session_id: string }>(results: T[]): T[] {
  const key = (r: T) => {
    const parts = parseSessionId(r.session_id);
    return parts ? [parts.taskIndex, parts.sampleIndex] : [Number.MAX_SAFE_INTEGER, 0];
  };
  return [...results].sort((a, b) => {
    const [ta, sa] = key(a);
    const [tb, sb] = key(b);
    return ta! - tb! || sa! - sb!;
  });
}

/** Upstream's `TaskStatus` (`GET` and `DELETE /rollout/task/{id}`). */
export interface UpstreamTaskStatus {
  task_id: string;
  status: RolloutState;
  total_sessions: number;
  completed_sessions: number;
  results: UpstreamSessionResult[];
  result_paths: string[];
}

/**
 * Upstream's `TaskStatus` of a task from its batch status and accepted results.
 *
 * @example
 * ```ts
 * upstreamTaskStatus("t1", status, results); // { task_id: "t1", status: "completed", … }
 * ```
 */
export function upstreamTaskStatus(
  taskId: string,
  status: BatchStatusBody,
  results: SessionResult[],
): UpstreamTaskStatus {
  return {
    task_id: taskId,
    status: rolloutState(status),
    total_sessions: status.sessions,
    completed_sessions: status.completed_sessions,
    results: inSessionOrder(results).map(upstreamSessionResult),
    // Results live in the ledger and R2, not in files on a shared disk.
    result_paths: [],
  };
}

/**
 * The callback body of an upstream task: upstream's `TaskResult`, plus `batch_id` and
 * `callback_id`. Delivery is at-least-once; `callback_id` (also the `Idempotency-Key` header) is
 * the same on every delivery of one run of the task, so a trainer can drop repeats.
 *
 * @example
 * ```ts
 * const body = JSON.stringify(upstreamTaskResult("t1", "rollout:t1", "completed", results));
 * ```
 */
export function upstreamTaskResult(
  taskId: string,
  batchId: string,
  state: "completed" | "failed",
  results: SessionResult[],
): Json {
  return {
    task_id: taskId,
    status: state,
    results: inSessionOrder(results).map(upstreamSessionResult),
    result_paths: [],
    batch_id: batchId,
    callback_id: callbackId(batchId, taskId),
  };
}

/**
 * The id shared by every delivery of one task's callback (`Idempotency-Key` and, for upstream
 * tasks, `callback_id`).
 *
 * @example
 * ```ts
 * callbackId("rollout:t1", "t1"); // "rollout:t1:t1"
 * ```
 */
export function callbackId(batchId: string, taskId: string): string {
  return `${batchId}:${taskId}`;
}
