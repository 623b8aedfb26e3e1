/**
 * Trajectory shapes. Field names keep upstream Polar's (`prompt_ids, response_ids, loss_mask,
 * response_logprobs, prompt_messages, response_messages, tools, finish_reason, reward, metadata`)
 * so an upstream trainer bridge reads them unchanged; provenance (weight version, replica, cached
 * tokens) is added in `metadata` and on the completion record.
 *
 * @module
 */
import { z } from "zod";
import { RoutedExperts } from "./routed-experts";
import { JsonObject } from "./task";

/** Terminal status of a trajectory (upstream: COMPLETED, TIMEOUT, ERROR). */
export const TrajectoryStatus = z.enum(["COMPLETED", "TIMEOUT", "ERROR"]);
export type TrajectoryStatus = z.infer<typeof TrajectoryStatus>;

/**
 * One training sequence. `loss_mask` and `response_logprobs` (when present) have exactly one
 * entry per `response_ids` entry: logprobs are aligned with the ids they belong to or absent.
 */
export const Trace = z
  .strictObject({
    prompt_ids: z.array(z.number().int().min(0)),
    response_ids: z.array(z.number().int().min(0)),
    loss_mask: z.array(z.union([z.literal(0), z.literal(1)])),
    response_logprobs: z.array(z.number()).nullable(),
    prompt_messages: z.array(JsonObject),
    response_messages: z.array(JsonObject),
    tools: z.array(JsonObject).nullable(),
    finish_reason: z.string().nullable(),
    reward: z.number().nullable(),
    metadata: JsonObject,
    /**
     * The experts the engine routed each position `[0, prompt + response − 1)` to (MoE routing
     * replay; `protocol/routed-experts.ts`), when the proxy recorded them for every call of the chain.
     */
    routed_experts: RoutedExperts.optional(),
  })
  .superRefine((t, ctx) => {
    if (t.loss_mask.length !== t.response_ids.length) {
      ctx.addIssue({ code: "custom", path: ["loss_mask"], message: "length must equal response_ids length" });
    }
    const positions = t.prompt_ids.length + t.response_ids.length - 1;
    if (t.routed_experts && (t.routed_experts.start !== 0 || t.routed_experts.rows !== positions)) {
      ctx.addIssue({
        code: "custom",
        path: ["routed_experts"],
        message: `must cover positions [0, ${positions}) (prompt + response − 1)`,
      });
    }
    if (t.response_logprobs && t.response_logprobs.length !== t.response_ids.length) {
      ctx.addIssue({
        code: "custom",
        path: ["response_logprobs"],
        message: "length must equal response_ids length",
      });
    }
  });
export type Trace = z.infer<typeof Trace>;

/** All traces of one session plus builder and evaluation metadata. */
export const Trajectory = z.strictObject({
  status: TrajectoryStatus,
  traces: z.array(Trace),
  metadata: JsonObject,
  error: z.string().nullable(),
});
export type Trajectory = z.infer<typeof Trajectory>;

/**
 * One model call as the proxy saw it: the request the harness sent, the request served to the
 * engine, the normalised engine response, and the token ids pulled out of it.
 *
 * `response_logprobs` is null when the engine did not return logprobs aligned with `response_ids`.
 * `policy_version` is also kept in `metadata.policy_version`, where earlier readers look.
 */
export const CompletionRecord = z.strictObject({
  completion_id: z.string(),
  session_id: z.string(),
  timestamp: z.string(),
  api_type: z.enum(["openai_chat", "openai_responses", "anthropic", "google"]),
  engine: z.string(),
  model_requested: z.string().nullable(),
  model_used: z.string(),
  original_request: JsonObject,
  request: JsonObject,
  response: JsonObject,
  prompt_ids: z.array(z.number().int().min(0)),
  response_ids: z.array(z.number().int().min(0)),
  response_logprobs: z.array(z.number()).nullable(),
  finish_reason: z.string().nullable(),
  /** The engine's weight version at the end of the call (`meta_info.weight_version`). */
  weight_version: z.string().nullable(),
  /**
   * The replica's weight version as the proxy knew it when it dispatched the call (from
   * `/model_info` or the replica's previous answer); absent on records of older proxies.
   */
  weight_version_start: z.string().nullable().optional(),
  /** The fence's policy version when the call was admitted; absent on records of older proxies. */
  policy_version: z.string().nullable().optional(),
  cached_tokens: z.number().int().min(0).nullable(),
  latency_ms: z.number().min(0),
  replica: z.string(),
  metadata: JsonObject,
  /** The call's routed experts as the engine returned them, when the proxy asked (MoE routing replay). */
  routed_experts: RoutedExperts.optional(),
});
export type CompletionRecord = z.infer<typeof CompletionRecord>;
