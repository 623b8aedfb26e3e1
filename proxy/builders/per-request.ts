/**
 * The `per_request` builder: one trace per recorded completion (upstream's default builder).
 *
 * @module
 */
import type { CompletionRecord, JsonObject, Trace, Trajectory } from "../../protocol";
import type { VersionSegmentSummary } from "../../tokenizer/bridge";

/** What a builder knows about the session besides its records. */
export interface BuildContext {
  session_id: string;
  task_id: string;
  /** The builder's `config` from the task's `StrategySpec`. */
  config: JsonObject;
}

/** A trajectory builder: records in, trajectory out. Pure. */
export type TrajectoryBuilder = (records: readonly CompletionRecord[], ctx: BuildContext) => Trajectory;

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const objects = (v: unknown): JsonObject[] => (Array.isArray(v) ? v.filter(isObject) : []);

/**
 * The policy version a record was admitted under: the record's own field, else (records of older
 * proxies) `metadata.policy_version`.
 *
 * @example
 * ```ts
 * recordPolicyVersion(record); // "3"
 * ```
 */
export function recordPolicyVersion(record: CompletionRecord): string | null {
  const v = record.policy_version !== undefined ? record.policy_version : record.metadata.policy_version;
  return typeof v === "string" ? v : null;
}

/**
 * A continued turn's version stretches (`metadata.partial_rollout.segments` of a token-mode
 * record: the tokens a weight-update abort kept, then the continuation), as the builders put them
 * in a trace's metadata: `{len, policy_version, weight_version_start, weight_version}` each, in
 * token order. Null for a turn one version sampled.
 *
 * @example
 * ```ts
 * recordVersionSegments(record); // [{ len: 12, policy_version: "3", … }, { len: 20, policy_version: "4", … }]
 * ```
 */
export function recordVersionSegments(record: CompletionRecord): VersionSegmentSummary[] | null {
  const partial = record.metadata.partial_rollout;
  if (!isObject(partial) || !Array.isArray(partial.segments)) return null;
  const text = (v: unknown) => (typeof v === "string" ? v : null);
  const segments = objects(partial.segments).map((s) => ({
    len: typeof s.len === "number" && Number.isInteger(s.len) && s.len >= 0 ? s.len : 0,
    policy_version: text(s.policy_version),
    weight_version_start: text(s.weight_version_start),
    weight_version: text(s.weight_version),
  }));
  // Only a split that covers the sampled ids exactly says which token came from where.
  const covered = segments.reduce((n, s) => n + s.len, 0);
  return segments.length > 1 && covered === record.response_ids.length ? segments : null;
}

/**
 * One trace from one completion: the served prompt, the sampled ids (all trainable), aligned
 * logprobs or null, and the messages and tools the engine saw.
 *
 * @example
 * ```ts
 * const trace = traceFromRecord(proxy.completions("s-1")[0]);
 * ```
 */
export function traceFromRecord(record: CompletionRecord): Trace {
  const choices = Array.isArray(record.response.choices) ? record.response.choices : [];
  const first = choices[0];
  const message = isObject(first) && isObject(first.message) ? first.message : null;
  const tools = objects(record.request.tools);
  return {
    prompt_ids: [...record.prompt_ids],
    response_ids: [...record.response_ids],
    loss_mask: record.response_ids.map(() => 1 as const),
    response_logprobs: record.response_logprobs ? [...record.response_logprobs] : null,
    prompt_messages: objects(record.request.messages),
    response_messages: message ? [message] : [],
    tools: tools.length > 0 ? tools : null,
    finish_reason: record.finish_reason,
    reward: null,
    metadata: {
      completion_id: record.completion_id,
      // Provenance for off-policy correction: the trainer's policy version in effect for this call,
      // the replica's weight version when it was dispatched and when it ended.
      policy_version: recordPolicyVersion(record),
      weight_version_start: record.weight_version_start ?? null,
      weight_version: record.weight_version,
      cached_tokens: record.cached_tokens,
      replica: record.replica,
      latency_ms: record.latency_ms,
      ...withSegments(record),
    },
  };
}

function withSegments(record: CompletionRecord): { version_segments?: VersionSegmentSummary[] } {
  const segments = recordVersionSegments(record);
  return segments ? { version_segments: segments } : {};
}

/**
 * `per_request`: one trace per completion, in completion order. An empty session is an ERROR
 * trajectory with error "no completions" (upstream behaviour): nothing to train on.
 *
 * @example
 * ```ts
 * const trajectory = buildPerRequest(records, { session_id: "s-1", task_id: "t-1", config: {} });
 * ```
 */
export const buildPerRequest: TrajectoryBuilder = (records, ctx) => {
  const traces = records.map(traceFromRecord);
  const metadata = {
    builder: "per_request",
    session_id: ctx.session_id,
    task_id: ctx.task_id,
    record_count: records.length,
    trace_count: traces.length,
  };
  if (records.length === 0) return { status: "ERROR", traces: [], metadata, error: "no completions" };
  return { status: "COMPLETED", traces, metadata, error: null };
};
