/**
 * The `/generate` contract every part of Polar-TS holds an engine to, written once: the sampling
 * bounds SGLang's `SamplingParams.verify()` enforces, its context-limit rule, the prompt tail its
 * affected builds put in front of `output_ids`. The proxy refuses what SGLang would refuse before
 * the call (in the harness family's error shape), the simulator refuses it with SGLang's messages,
 * and the Python reference engine loads a JSON copy of {@link SGLANG_CONTRACT}
 * (`npm run gen:sglang-contract` writes it; a test fails when it is stale).
 *
 * Plain data and pure functions only: the Worker imports `protocol/` too.
 *
 * @module
 */

/** One numeric `sampling_params` field and the range SGLang accepts. */
export interface SamplingBound {
  field: string;
  /** Lower bound, inclusive unless `minExclusive`. */
  min?: number;
  minExclusive?: boolean;
  /** Upper bound, inclusive. */
  max?: number;
  /** Only whole numbers (a count, or top-k). */
  integer?: boolean;
  /** Values accepted outside the range (top_k's -1, "no cut"). */
  also?: number[];
  /** The rule as SGLang's message words it: `"<field> must be <rule>, got <value>."`. */
  rule: string;
}

/**
 * The contract itself (JSON-serialisable; the reference engine reads a copy).
 *
 * @example
 * ```ts
 * SGLANG_CONTRACT.context.outputRoom; // 1: a prompt of n tokens leaves context − n − 1 new tokens
 * ```
 */
export const SGLANG_CONTRACT = {
  schema: 1,
  /**
   * What it mirrors. Sampling bounds: `python/sglang/srt/sampling/sampling_params.py`
   * (`SamplingParams.verify`), identical in the 0.5 releases and main as of 2026-11. Context rule:
   * `python/sglang/srt/managers/tokenizer_manager.py` (`_validate_one_request`).
   */
  mirrors: "SGLang 0.5.x releases and main as of 2026-11",
  sources: [
    "sglang python/sglang/srt/sampling/sampling_params.py SamplingParams.verify",
    "sglang python/sglang/srt/managers/tokenizer_manager.py TokenizerManager._validate_one_request",
    "sglang python/sglang/srt/managers/schedule_batch.py INIT_INCREMENTAL_DETOKENIZATION_OFFSET",
  ],
  /** SGLang's `max_new_tokens` when a request gives none. */
  defaultMaxNewTokens: 128,
  /** In `verify()`'s order, which decides the message of a request with several bad fields. */
  sampling: [
    { field: "temperature", min: 0, rule: "a non-negative finite number" },
    { field: "top_p", min: 0, minExclusive: true, max: 1, rule: "in (0, 1]" },
    { field: "min_p", min: 0, max: 1, rule: "in [0, 1]" },
    { field: "top_k", min: 1, integer: true, also: [-1], rule: "-1 (disable) or at least 1" },
    { field: "frequency_penalty", min: -2, max: 2, rule: "in [-2, 2]" },
    { field: "presence_penalty", min: -2, max: 2, rule: "in [-2, 2]" },
    {
      field: "repetition_penalty",
      min: 0,
      minExclusive: true,
      max: 2,
      rule: "in (0, 2] (1.0 = no penalty)",
    },
    { field: "min_new_tokens", min: 0, integer: true, rule: "in [0, max_new_tokens]" },
    { field: "max_new_tokens", min: 0, integer: true, rule: "at least 0" },
  ] satisfies SamplingBound[],
  messages: {
    bound: "{field} must be {rule}, got {value}.",
    notNumber: "{field} must be a number, got {value}.",
    minAboveMax: "min_new_tokens must be in [0, max_new_tokens({max})], got {value}.",
    logitBias: "logit_bias must has keys in [0, {last}], got {key}.",
    grammars: "Only one of regex, json_schema, or ebnf can be set.",
  },
  /** At most one of these constrained-decoding fields may be set. */
  grammars: ["json_schema", "regex", "ebnf"],
  /**
   * SGLang refuses a prompt of `context_len` tokens or more, and `input + max_new_tokens >=
   * context_len` (0.5 releases; main as of 2026-11 refuses `input + max_new_tokens > context_len`
   * with speculative decoding's reserved tokens added to the input). A request keeping
   * `input + max_new_tokens <= context_len − outputRoom` passes both.
   */
  context: {
    outputRoom: 1,
    inputMessage: "The input ({input} tokens) is longer than the model's context length ({context} tokens).",
    totalMessage:
      "Requested token count exceeds the model's maximum context length of {context} tokens. You requested a total of {total} tokens: {input} tokens from the input messages and {max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
  },
  /**
   * The `/generate` fields Polar-TS's token mode sends and reads (SGLang's `GenerateReqInput` and
   * the reply of `tokenizer_manager`), which every engine it is tested against must honour (the
   * reference engine refuses `image_data` by name: it has no vision model).
   */
  generate: {
    request: [
      "input_ids",
      "sampling_params",
      "rid",
      "return_logprob",
      "logprob_start_len",
      "stream",
      "image_data",
      "return_prompt_token_ids",
    ],
    samplingParams: [
      "temperature",
      "top_p",
      "top_k",
      "min_p",
      "max_new_tokens",
      "stop",
      "stop_token_ids",
      "frequency_penalty",
      "presence_penalty",
      "repetition_penalty",
      "sampling_seed",
      "skip_special_tokens",
      "spaces_between_special_tokens",
      "no_stop_trim",
    ],
    response: ["text", "output_ids", "meta_info"],
    /** With `return_prompt_token_ids: true`. */
    responseWithPromptIds: ["prompt_token_ids"],
    metaInfo: [
      "id",
      "finish_reason",
      "prompt_tokens",
      "completion_tokens",
      "cached_tokens",
      "weight_version",
      "output_token_logprobs",
    ],
  },
  /**
   * Builds that filled `output_ids` from the detokenizer's `decode_ids` (sglang issues #10896,
   * #17240) put up to this many prompt tokens (the prompt's tail) in front of the sampled ids.
   */
  outputIds: { maxPromptTail: 5 },
} as const;

/** A refused request: the `sampling_params` field (or `input_ids`) and SGLang's message. */
export interface ContractViolation {
  field: string;
  message: string;
}

/**
 * Fills `{name}` placeholders of a contract message (unknown names stay as they are).
 *
 * @example
 * ```ts
 * formatContractMessage("top_p must be {rule}, got {value}.", { rule: "in (0, 1]", value: 0 }); // "top_p must be in (0, 1], got 0."
 * ```
 */
export function formatContractMessage(template: string, values: Record<string, unknown>): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => (k in values ? String(values[k]) : m));
}

/**
 * The bound of one `sampling_params` field, if the contract has one.
 *
 * @example
 * ```ts
 * samplingBound("top_p")?.rule; // "in (0, 1]"
 * ```
 */
export function samplingBound(field: string): SamplingBound | undefined {
  return (SGLANG_CONTRACT.sampling as readonly SamplingBound[]).find((b) => b.field === field);
}

/**
 * Whether SGLang accepts `value` for `field` (a field without a bound accepts any number).
 *
 * @example
 * ```ts
 * withinSamplingBound("top_k", -1); // true
 * withinSamplingBound("repetition_penalty", 2.5); // false
 * ```
 */
export function withinSamplingBound(field: string, value: number): boolean {
  const bound = samplingBound(field);
  return bound ? inBound(bound, value) : Number.isFinite(value);
}

/**
 * The message for one value against its bound, or null when SGLang accepts it. `null`/absent
 * values are SGLang's defaults and always pass.
 *
 * @example
 * ```ts
 * samplingBoundViolation("repetition_penalty", 3);
 * // { field: "repetition_penalty", message: "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3." }
 * ```
 */
export function samplingBoundViolation(field: string, value: unknown): ContractViolation | null {
  if (value === undefined || value === null) return null;
  const bound = samplingBound(field);
  if (!bound) return null;
  // An object or list is shown as JSON: String() throws on one whose toString is not a function
  // (`{"toString": 1}` from a request body), which made a 400 a 500.
  const shown =
    typeof value === "string" || typeof value === "object" ? JSON.stringify(value) : String(value);
  if (typeof value !== "number" || Number.isNaN(value)) {
    return {
      field,
      message: formatContractMessage(SGLANG_CONTRACT.messages.notNumber, { field, value: shown }),
    };
  }
  if (inBound(bound, value)) return null;
  return {
    field,
    message: formatContractMessage(SGLANG_CONTRACT.messages.bound, { field, rule: bound.rule, value: shown }),
  };
}

function inBound(b: SamplingBound, v: number): boolean {
  if (!Number.isFinite(v)) return false;
  if (b.also?.includes(v)) return true;
  if (b.integer && !Number.isInteger(v)) return false;
  if (b.min !== undefined && (b.minExclusive ? v <= b.min : v < b.min)) return false;
  if (b.max !== undefined && v > b.max) return false;
  return true;
}

/**
 * The first thing SGLang's `SamplingParams.verify()` would refuse in a `sampling_params` object,
 * in its order, or null. `vocabSize` checks `logit_bias` keys when given.
 *
 * @example
 * ```ts
 * samplingParamsViolation({ temperature: 0.7, top_p: 0 })?.message; // "top_p must be in (0, 1], got 0."
 * samplingParamsViolation({ min_new_tokens: 9, max_new_tokens: 4 })?.field; // "min_new_tokens"
 * ```
 */
export function samplingParamsViolation(
  params: Record<string, unknown>,
  vocabSize?: number,
): ContractViolation | null {
  for (const b of SGLANG_CONTRACT.sampling) {
    const bad = samplingBoundViolation(b.field, params[b.field]);
    if (bad) return bad;
  }
  const min = params.min_new_tokens;
  const max = params.max_new_tokens;
  if (typeof min === "number" && typeof max === "number" && min > max) {
    return {
      field: "min_new_tokens",
      message: formatContractMessage(SGLANG_CONTRACT.messages.minAboveMax, { max, value: min }),
    };
  }
  const bias = params.logit_bias;
  if (vocabSize !== undefined && bias !== undefined && bias !== null) {
    if (typeof bias !== "object" || Array.isArray(bias)) {
      return { field: "logit_bias", message: "logit_bias must be an object of token id → bias." };
    }
    for (const key of Object.keys(bias)) {
      const id = Number(key);
      if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
        return {
          field: "logit_bias",
          message: formatContractMessage(SGLANG_CONTRACT.messages.logitBias, { last: vocabSize - 1, key }),
        };
      }
    }
  }
  const grammars = SGLANG_CONTRACT.grammars.filter((g) => params[g] !== undefined && params[g] !== null);
  if (grammars.length > 1) return { field: grammars[1]!, message: SGLANG_CONTRACT.messages.grammars };
  return null;
}

/**
 * SGLang's context-limit refusal for a prompt of `inputTokens` asking `maxNewTokens` (null: none
 * asked, only the prompt is checked), or null when the engine accepts it.
 *
 * @example
 * ```ts
 * contextViolation(900, 100, 1000)?.field; // "max_new_tokens" (900 + 100 reaches the limit)
 * contextViolation(900, 99, 1000); // null
 * ```
 */
export function contextViolation(
  inputTokens: number,
  maxNewTokens: number | null,
  contextLength: number,
): ContractViolation | null {
  const c = SGLANG_CONTRACT.context;
  if (inputTokens >= contextLength) {
    return {
      field: "input_ids",
      message: formatContractMessage(c.inputMessage, { input: inputTokens, context: contextLength }),
    };
  }
  if (maxNewTokens !== null && inputTokens + maxNewTokens > contextLength - c.outputRoom) {
    return {
      field: "max_new_tokens",
      message: formatContractMessage(c.totalMessage, {
        context: contextLength,
        total: inputTokens + maxNewTokens,
        input: inputTokens,
        max_new_tokens: maxNewTokens,
      }),
    };
  }
  return null;
}

/**
 * The most new tokens a prompt of `inputTokens` may ask for under {@link contextViolation}
 * (0 or less: the prompt leaves no room).
 *
 * @example
 * ```ts
 * maxNewTokensRoom(900, 1000); // 99
 * ```
 */
export function maxNewTokensRoom(inputTokens: number, contextLength: number): number {
  return contextLength - inputTokens - SGLANG_CONTRACT.context.outputRoom;
}

/**
 * How many prompt tokens an affected build put in front of the sampled ids: `k` (1 ≤ k ≤ 5) when
 * `outputIds` is the last `k` prompt ids followed by exactly `sampledIds`, else 0 (which includes
 * the plain, correct form).
 *
 * @example
 * ```ts
 * promptTailPrefix([5, 6, 7, 8], [8, 40, 41], [40, 41]); // 1
 * promptTailPrefix([5, 6], [40, 41], [40, 41]); // 0
 * ```
 */
export function promptTailPrefix(
  promptIds: readonly number[],
  outputIds: readonly unknown[],
  sampledIds: readonly number[],
): number {
  const k = outputIds.length - sampledIds.length;
  if (k < 1 || k > SGLANG_CONTRACT.outputIds.maxPromptTail || k > promptIds.length) return 0;
  const tail = promptIds.slice(promptIds.length - k);
  for (let i = 0; i < k; i++) if (outputIds[i] !== tail[i]) return 0;
  for (let i = 0; i < sampledIds.length; i++) if (outputIds[k + i] !== sampledIds[i]) return 0;
  return k;
}

/** Where the reference engine's copy lives, from the repository root. */
export const SGLANG_CONTRACT_COPY_PATH =
  "clients/reference-engine/src/polar_reference_engine/sglang_contract.json";

/**
 * The text of the reference engine's copy (what `npm run gen:sglang-contract` writes).
 *
 * @example
 * ```ts
 * JSON.parse(sglangContractJson()).schema; // 1
 * ```
 */
export function sglangContractJson(): string {
  return `${JSON.stringify({ generated: "npm run gen:sglang-contract; do not edit", ...SGLANG_CONTRACT }, null, 2)}\n`;
}
