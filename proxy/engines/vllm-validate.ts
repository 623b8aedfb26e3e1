/**
 * What vLLM refuses in a chat request, refused first by the proxy in the harness family's error
 * shape (a 400 naming the field) instead of reaching the engine as its own 400. Mirrors vLLM main
 * as of 2026-11: `SamplingParams._verify_args` (`vllm/sampling_params.py`) and the `check_logprobs`
 * validator of `ChatCompletionRequest` (`vllm/entrypoints/openai/chat_completion/protocol.py`).
 * Values the harness leaves unset are not checked: vLLM fills them from its own defaults.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { ProxyHttpError } from "../errors";

/**
 * vLLM's default `--max-logprobs` (`ModelConfig.max_logprobs`): more `top_logprobs` is refused
 * ("Requested sample logprobs of N, which is greater than max allowed: 20").
 *
 * @example
 * ```ts
 * if (top > VLLM_DEFAULT_MAX_LOGPROBS) refuse();
 * ```
 */
export const VLLM_DEFAULT_MAX_LOGPROBS = 20;

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/**
 * Throws a 400 naming the first field vLLM would refuse.
 *
 * @example
 * ```ts
 * validateVllmSampling({ messages, temperature: 2.5 }); // throws: temperature must be in [0, 2]
 * ```
 */
export function validateVllmSampling(chat: JsonObject): void {
  const bad = (param: string, message: string) =>
    new ProxyHttpError(400, "invalid_request_error", "invalid_request", `${param}: ${message}`, param);
  const number = (name: string): number | null => {
    const v = chat[name];
    if (v === undefined || v === null) return null;
    if (!isNum(v)) throw bad(name, "must be a finite number");
    return v;
  };
  const integer = (name: string): number | null => {
    const v = number(name);
    if (v !== null && !Number.isInteger(v)) throw bad(name, "must be an integer");
    return v;
  };
  // `_verify_args`: temperature in [0, 2] (the upper bound is recent main; older releases only
  // refuse negatives), top_p in (0, 1], top_k 0 or -1 (disabled) or ≥ 1, min_p in [0, 1].
  const temperature = number("temperature");
  if (temperature !== null && (temperature < 0 || temperature > 2))
    throw bad("temperature", `must be in [0, 2], got ${temperature}`);
  const topP = number("top_p");
  if (topP !== null && !(topP > 0 && topP <= 1)) throw bad("top_p", `must be in (0, 1], got ${topP}`);
  const topK = integer("top_k");
  if (topK !== null && topK < -1) throw bad("top_k", `must be 0 (disable), or at least 1, got ${topK}`);
  const minP = number("min_p");
  if (minP !== null && (minP < 0 || minP > 1)) throw bad("min_p", `must be in [0, 1], got ${minP}`);
  // Penalties: presence and frequency in [-2, 2]; repetition only > 0 (vLLM has no upper bound).
  for (const name of ["presence_penalty", "frequency_penalty"]) {
    const v = number(name);
    if (v !== null && (v < -2 || v > 2)) throw bad(name, `must be in [-2, 2], got ${v}`);
  }
  const repetition = number("repetition_penalty");
  if (repetition !== null && repetition <= 0)
    throw bad("repetition_penalty", `must be greater than zero, got ${repetition}`);
  // Token budgets: max_tokens ≥ 1; min_tokens ≥ 0 and not above max_tokens.
  const maxName = chat.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  const maxTokens = integer(maxName);
  if (maxTokens !== null && maxTokens < 1) throw bad(maxName, `must be at least 1, got ${maxTokens}`);
  const minTokens = integer("min_tokens");
  if (minTokens !== null && minTokens < 0)
    throw bad("min_tokens", `must be greater than or equal to 0, got ${minTokens}`);
  if (minTokens !== null && maxTokens !== null && minTokens > maxTokens)
    throw bad("min_tokens", `must be less than or equal to ${maxName}=${maxTokens}, got ${minTokens}`);
  // `check_logprobs`: top_logprobs ≥ 0 or -1, and at most the server's max_logprobs (default 20);
  // prompt_logprobs ≥ 0 or -1 and never with stream=true.
  const top = integer("top_logprobs");
  if (top !== null && top < 0 && top !== -1) throw bad("top_logprobs", "must be a positive value or -1");
  if (top !== null && top > VLLM_DEFAULT_MAX_LOGPROBS)
    throw bad("top_logprobs", `must be at most ${VLLM_DEFAULT_MAX_LOGPROBS} (vLLM's default --max-logprobs)`);
  const promptLogprobs = integer("prompt_logprobs");
  if (promptLogprobs !== null && promptLogprobs < 0 && promptLogprobs !== -1)
    throw bad("prompt_logprobs", "must be a positive value or -1");
  if (promptLogprobs !== null && promptLogprobs !== 0 && chat.stream === true)
    throw bad("prompt_logprobs", "is not available when stream=true");
  // Stop strings: "stop cannot contain an empty string".
  const stop = chat.stop;
  if (stop === "" || (Array.isArray(stop) && stop.some((s) => s === "")))
    throw bad("stop", "cannot contain an empty string");
  // `seed` is a 64-bit signed integer in vLLM's request model.
  const seed = integer("seed");
  if (seed !== null && !Number.isSafeInteger(seed)) throw bad("seed", "must be a 64-bit integer");
}
