/**
 * The chat request as the sim reads it, and the OpenAI logprob entries both answer shapes (SGLang's
 * in `openai-chat.ts`, vLLM's in `vllm-shape.ts`) give; apart from both so neither imports the other.
 *
 * @module
 */
import { z } from "zod";
import { type EngineResult, SIM_LIMITS, type SimEngineCore } from "./engine";

const ToolSchema = z.looseObject({
  type: z.string().optional(),
  function: z.looseObject({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.unknown().optional(),
    strict: z.boolean().nullish(),
  }),
});

const MessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() })), z.null()]).optional(),
  reasoning_content: z.string().nullish(),
  /** vLLM's name for the reasoning of an earlier assistant turn. */
  reasoning: z.string().nullish(),
  tool_calls: z
    .array(
      z.looseObject({ function: z.looseObject({ name: z.string(), arguments: z.unknown().optional() }) }),
    )
    .nullish(),
});

const maxTokens = z.number().int().min(0).max(SIM_LIMITS.contextLength).nullish();

/** The chat request fields the sim reads; unknown fields are ignored, as SGLang does. */
export const ChatRequest = z.looseObject({
  model: z.string().nullish(),
  messages: z.array(MessageSchema).min(1, "must contain at least one message"),
  tools: z.array(ToolSchema).nullish(),
  tool_choice: z.unknown().optional(),
  max_tokens: maxTokens,
  max_completion_tokens: maxTokens,
  temperature: z.number().min(0).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(SIM_LIMITS.maxStops)]).nullish(),
  stop_token_ids: z.array(z.number().int().min(0)).max(SIM_LIMITS.maxStops).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  n: z.literal(1).nullish(),
  return_prompt_token_ids: z.boolean().nullish(),
  return_meta_info: z.boolean().nullish(),
  /** vLLM (≥ 0.10.2): prompt ids at the top level, output ids per choice (also when streaming). */
  return_token_ids: z.boolean().nullish(),
  input_ids: z.array(z.number()).nullish(),
  rid: z.string().min(1).nullish(),
  user: z.string().nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  skip_special_tokens: z.boolean().nullish(),
  no_stop_trim: z.boolean().nullish(),
  separate_reasoning: z.boolean().nullish(),
  ignore_eos: z.boolean().nullish(),
  /** SGLang `Optional[int]`, vLLM `int` (default 0): read by `readPriority` (`priority.ts`). */
  priority: z.unknown().optional(),
  /** SGLang: the MoE routes of the sequence, in the response's `sglext` (`routed-experts.ts`). */
  return_routed_experts: z.boolean().nullish(),
  /** SGLang `int = 0`: read by `readRoutedExpertsStartLen` (`routed-experts.ts`). */
  routed_experts_start_len: z.unknown().optional(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

/**
 * OpenAI `logprobs.content[]`, one entry per output id (including the end-of-turn token).
 *
 * @example
 * ```ts
 * logprobContent(engine, result)[0]; // { token: "Hello", logprob: -0.1, bytes: [...], top_logprobs: [] }
 * ```
 */
export function logprobContent(engine: SimEngineCore, result: EngineResult) {
  return result.outputIds.map((id, i) => {
    const token = engine.tokenizer.decode([id]);
    return { token, logprob: result.logprobs[i]!, bytes: [...Buffer.from(token, "utf8")], top_logprobs: [] };
  });
}
