/**
 * What the simulated engine's vLLM flavors refuse in a chat request, worded as vLLM words it:
 * sampling values `SamplingParams._verify_args` refuses (`vllm/sampling_params.py`), the logprob
 * rules of `ChatCompletionRequest.check_logprobs` and `validate_stream_options`
 * (`vllm/entrypoints/openai/chat_completion/protocol.py`), and the context rule of
 * `TokenizeParams` (`vllm/renderers/params.py`): a prompt longer than
 * `max_model_len - max_tokens` is refused, so prompt + max_tokens may equal the context exactly
 * (SGLang refuses that case). Mirrors vLLM main as of 2026-11; `vllm-0.10.1` differs only in not
 * knowing `return_token_ids` (added in 0.10.2, PR #22587), which it then ignores, as vLLM ignores
 * any unknown request field.
 *
 * @module
 */
import { SIM_LIMITS } from "./engine";
import { HttpError } from "./http";

/**
 * vLLM's default `--max-logprobs`.
 *
 * @example
 * ```ts
 * if (top > VLLM_MAX_LOGPROBS) refuse();
 * ```
 */
export const VLLM_MAX_LOGPROBS = 20;

/**
 * A refusal in vLLM's words: `VLLMValidationError` appends the offending parameter and value.
 *
 * @example
 * ```ts
 * throw vllmValidationError("temperature must be in [0, 2], got 3.", "temperature", 3);
 * ```
 */
export function vllmValidationError(message: string, parameter?: string, value?: unknown): HttpError {
  const suffix = parameter === undefined ? "" : ` (parameter=${parameter}, value=${String(value)})`;
  return new HttpError(400, `${message}${suffix}`);
}

/** `TokenizeParams.__post_init__`: more output tokens than the whole context. */
function tooManyOutputTokens(requested: number): HttpError {
  return vllmValidationError(
    `max_tokens=${requested} cannot be greater than max_model_len=${SIM_LIMITS.contextLength}. Please request fewer output tokens.`,
    "max_tokens",
    requested,
  );
}

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/**
 * Checks the raw request body the way vLLM does before it samples; throws its 400.
 *
 * @example
 * ```ts
 * checkVllmSampling({ messages, top_p: 0 }); // throws "top_p must be in (0, 1], got 0. (parameter=top_p, value=0)"
 * ```
 */
export function checkVllmSampling(raw: unknown): void {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return;
  const b = raw as Record<string, unknown>;
  for (const name of ["temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty"]) {
    if (b[name] != null && num(b[name]) === null)
      throw vllmValidationError(`${name} must be a number.`, name, b[name]);
  }
  if (b.stream_options != null && b.stream !== true)
    throw vllmValidationError("Stream options can only be defined when `stream=True`.", "stream_options");
  for (const name of ["prompt_logprobs", "top_logprobs"]) {
    if (b[name] != null && num(b[name]) === null)
      throw vllmValidationError(`\`${name}\` must be an integer.`, name, b[name]);
  }
  const promptLogprobs = num(b.prompt_logprobs);
  if (promptLogprobs !== null) {
    if (b.stream === true && (promptLogprobs > 0 || promptLogprobs === -1))
      throw vllmValidationError("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
    if (promptLogprobs < 0 && promptLogprobs !== -1)
      throw vllmValidationError(
        "`prompt_logprobs` must be a positive value or -1.",
        "prompt_logprobs",
        promptLogprobs,
      );
  }
  const top = num(b.top_logprobs);
  if (top !== null) {
    if (top < 0 && top !== -1)
      throw vllmValidationError("`top_logprobs` must be a positive value or -1.", "top_logprobs", top);
    if ((top === -1 || top > 0) && b.logprobs !== true)
      throw vllmValidationError("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    if (top > VLLM_MAX_LOGPROBS)
      throw vllmValidationError(
        `Requested sample logprobs of ${top}, which is greater than max allowed: ${VLLM_MAX_LOGPROBS}`,
        "logprobs",
        top,
      );
  }
  const presence = num(b.presence_penalty);
  if (presence !== null && (presence < -2 || presence > 2))
    throw vllmValidationError(`presence_penalty must be in [-2, 2], got ${presence}.`);
  const frequency = num(b.frequency_penalty);
  if (frequency !== null && (frequency < -2 || frequency > 2))
    throw vllmValidationError(`frequency_penalty must be in [-2, 2], got ${frequency}.`);
  const repetition = num(b.repetition_penalty);
  if (repetition !== null && repetition <= 0)
    throw vllmValidationError(`repetition_penalty must be greater than zero, got ${repetition}.`);
  const temperature = num(b.temperature);
  if (temperature !== null && temperature < 0)
    throw vllmValidationError(
      `temperature must be non-negative, got ${temperature}.`,
      "temperature",
      temperature,
    );
  if (temperature !== null && temperature > 2)
    throw vllmValidationError(
      `temperature must be in [0, 2], got ${temperature}.`,
      "temperature",
      temperature,
    );
  const topP = num(b.top_p);
  if (topP !== null && !(topP > 0 && topP <= 1))
    throw vllmValidationError(`top_p must be in (0, 1], got ${topP}.`, "top_p", topP);
  const topK = num(b.top_k);
  if (topK !== null && topK < -1)
    throw vllmValidationError(`top_k must be 0 (disable), or at least 1, got ${topK}.`);
  const minP = num(b.min_p);
  if (minP !== null && (minP < 0 || minP > 1))
    throw vllmValidationError(`min_p must be in [0, 1], got ${minP}.`);
  const maxTokens = num(b.max_completion_tokens ?? b.max_tokens);
  if (maxTokens !== null && maxTokens > SIM_LIMITS.contextLength) throw tooManyOutputTokens(maxTokens);
  if (maxTokens !== null && maxTokens < 1)
    throw vllmValidationError(`max_tokens must be at least 1, got ${maxTokens}.`, "max_tokens", maxTokens);
  const minTokens = num(b.min_tokens);
  if (minTokens !== null && minTokens < 0)
    throw vllmValidationError(`min_tokens must be greater than or equal to 0, got ${minTokens}.`);
  if (minTokens !== null && maxTokens !== null && minTokens > maxTokens)
    throw vllmValidationError(
      `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`,
    );
  const stop = b.stop;
  if (stop === "" || (Array.isArray(stop) && stop.some((s) => s === "")))
    throw vllmValidationError("stop cannot contain an empty string.");
}

/**
 * The output budget vLLM grants a prompt, or its refusal: with `max_tokens` the prompt may use at
 * most `max_model_len - max_tokens` tokens; without it the budget is what is left of the context
 * (and an empty budget fails `max_tokens must be at least 1`).
 *
 * @example
 * ```ts
 * vllmOutputBudget(100, 50); // 50
 * vllmOutputBudget(40_000, 1000); // throws "You passed 40000 input tokens and requested 1000 output tokens. …"
 * ```
 */
export function vllmOutputBudget(promptTokens: number, maxTokens: number | null | undefined): number {
  const context = SIM_LIMITS.contextLength;
  const requested = maxTokens ?? 0;
  if (requested > context) throw tooManyOutputTokens(requested);
  const maxInput = context - requested;
  if (promptTokens > maxInput)
    throw vllmValidationError(
      `You passed ${promptTokens} input tokens and requested ${requested} output tokens. However, the model's context length is only ${context} tokens, resulting in a maximum input length of ${maxInput} tokens. Please reduce the length of the input prompt.`,
      "input_tokens",
      promptTokens,
    );
  const budget = maxTokens ?? context - promptTokens;
  if (budget < 1)
    throw vllmValidationError(`max_tokens must be at least 1, got ${budget}.`, "max_tokens", budget);
  return budget;
}
