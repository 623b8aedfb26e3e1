/**
 * Pure request builder and response parser for SGLang's native `POST /generate` in token mode:
 * prompt ids in, sampled ids and their logprobs out. No I/O here; the proxy's `sglang` engine
 * posts the body and hands the JSON back.
 *
 * Field names follow SGLang's `GenerateReqInput` and `tokenizer_manager._handle_batch_output`
 * (see docs/token-mode.md). Every sampling parameter is sent explicitly: SGLang otherwise takes
 * temperature/top_p/top_k/min_p from the model's `generation_config.json`, and the trainer must
 * know what the policy was sampled with.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import {
  maxNewTokensRoom,
  promptTailPrefix,
  samplingBound,
  withinSamplingBound,
} from "../../../protocol/sglang-contract";
import type { ChatMessage, ChatTokenizer } from "../../../tokenizer/chat-tokenizer";

/**
 * A harness request field is unusable in token mode (HTTP 400 for the harness).
 *
 * @example
 * ```ts
 * try { samplingFromRequest({ n: 2 }); } catch (e) { (e as SamplingParamError).field; } // "n"
 * ```
 */
export class SamplingParamError extends Error {
  override readonly name = "SamplingParamError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/**
 * The engine's reply breaks the `/generate` contract (HTTP 502 for the harness): missing or
 * misaligned ids/logprobs, an unfinished request, a batch where one item was asked.
 *
 * @example
 * ```ts
 * try { parseGenerateResponse({}); } catch (e) { e instanceof GenerateResponseError; } // true
 * ```
 */
export class GenerateResponseError extends Error {
  override readonly name = "GenerateResponseError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`/generate response ${field}: ${message}`);
  }
}

/** Sampling parameters a harness may set, in OpenAI chat names (extensions as SGLang names them). */
export interface HarnessSampling {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  min_p?: number;
  /** `max_completion_tokens` wins over `max_tokens`, as in the OpenAI API. */
  max_tokens?: number;
  stop?: string[];
  stop_token_ids?: number[];
  frequency_penalty?: number;
  presence_penalty?: number;
  repetition_penalty?: number;
  seed?: number;
}

/** Values sent when the harness did not set a parameter (OpenAI's defaults, not the model's). */
export interface SamplingDefaults {
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  max_new_tokens: number;
}

/** OpenAI defaults (temperature 1, top_p 1, no top_k, no min_p) and 4096 new tokens at most. */
export const DEFAULT_SAMPLING: SamplingDefaults = {
  temperature: 1,
  top_p: 1,
  top_k: -1,
  min_p: 0,
  max_new_tokens: 4096,
};

/** SGLang's `stop` takes a list; OpenAI allows at most 4 sequences, SGLang has no cap. */
export const MAX_STOP_SEQUENCES = 16;

type Body = Record<string, unknown>;

function num(body: Body, key: string, check: (v: number) => boolean, rule: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || !check(v)) {
    throw new SamplingParamError(key, `must be ${rule}, got ${JSON.stringify(v)}`);
  }
  return v;
}

const isInt = (v: number) => Number.isInteger(v);

/**
 * A sampling field held to SGLang's bound from the shared contract: the engine's
 * `SamplingParams.verify()` answers anything outside it with a 400, so the harness gets the
 * refusal first, in its own API's error shape, naming the field.
 */
function bounded(body: Body, key: keyof HarnessSampling & string): number | undefined {
  const bound = samplingBound(key);
  if (!bound) throw new Error(`no contract bound for ${key}`);
  const rule = bound.integer ? `${bound.rule} (an integer)` : bound.rule;
  return num(body, key, (v) => withinSamplingBound(key, v), rule);
}

/**
 * Reads and checks the sampling fields of an OpenAI chat request body (the Anthropic adapter maps
 * `stop_sequences` → `stop` first). `n` other than 1 is refused: one request is one sampled turn.
 *
 * @example
 * ```ts
 * samplingFromRequest({ temperature: 0.7, max_tokens: 256, stop: "END" });
 * // { temperature: 0.7, max_tokens: 256, stop: ["END"] }
 * ```
 */
export function samplingFromRequest(body: Body): HarnessSampling {
  const out: HarnessSampling = {};
  const set = <K extends keyof HarnessSampling>(k: K, v: HarnessSampling[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  for (const key of ["temperature", "top_p", "top_k", "min_p"] as const) set(key, bounded(body, key));
  const maxKey = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  set(
    "max_tokens",
    num(body, maxKey, (v) => isInt(v) && v >= 1, "an integer >= 1"),
  );
  for (const key of ["frequency_penalty", "presence_penalty", "repetition_penalty"] as const) {
    set(key, bounded(body, key));
  }
  set(
    "seed",
    num(body, "seed", (v) => isInt(v), "an integer"),
  );
  const n = num(body, "n", (v) => isInt(v) && v >= 1, "an integer >= 1");
  if (n !== undefined && n !== 1) throw new SamplingParamError("n", "only n=1 is supported in token mode");
  const stop = body.stop;
  if (stop !== undefined && stop !== null) {
    const list = typeof stop === "string" ? [stop] : stop;
    if (!Array.isArray(list) || !list.every((s) => typeof s === "string" && s !== "")) {
      throw new SamplingParamError("stop", "must be a non-empty string or a list of them");
    }
    if (list.length > MAX_STOP_SEQUENCES) {
      throw new SamplingParamError("stop", `at most ${MAX_STOP_SEQUENCES} sequences`);
    }
    if (list.length > 0) out.stop = list as string[];
  }
  const ids = body.stop_token_ids;
  if (ids !== undefined && ids !== null) {
    if (!Array.isArray(ids) || !ids.every((i) => Number.isInteger(i) && i >= 0)) {
      throw new SamplingParamError("stop_token_ids", "must be a list of token ids");
    }
    if (ids.length > 0) out.stop_token_ids = ids as number[];
  }
  return out;
}

/** Input of {@link buildGenerateRequest}. */
export interface GenerateRequestInput {
  /** The bridged prompt. */
  inputIds: readonly number[];
  sampling: HarnessSampling;
  /** The model's context window (prompt + completion tokens); `max_new_tokens` is clamped under it. */
  contextLength: number;
  /** Request id; send it so `/abort_request {rid}` can reach this call. */
  rid: string;
  defaults?: SamplingDefaults;
  /** Images in prompt order (see {@link collectImageData}); omitted when empty. */
  imageData?: string[];
  /**
   * Ask for the routed experts of positions from here on (`return_routed_experts`,
   * `routed_experts_start_len`; MoE routing replay); omitted: not asked.
   */
  routedExpertsStart?: number;
}

/**
 * Builds the `/generate` body: `input_ids`, every sampling parameter explicit (`max_new_tokens`
 * clamped to what SGLang's context rule leaves, `context − prompt − 1`), special tokens
 * kept in the text and stop strings not trimmed (the ids always hold them; the text is only for
 * logs), `return_logprob: true` for the sampled tokens only (`logprob_start_len: -1`), not
 * streaming (the proxy synthesises SSE after the turn).
 *
 * @example
 * ```ts
 * buildGenerateRequest({ inputIds: [151644, 872, 198], sampling: { max_tokens: 64 }, contextLength: 40960, rid: "r1" });
 * // { input_ids: [...], rid: "r1", return_logprob: true, logprob_start_len: -1, stream: false,
 * //   sampling_params: { temperature: 1, top_p: 1, top_k: -1, min_p: 0, max_new_tokens: 64,
 * //                      skip_special_tokens: false, spaces_between_special_tokens: false, no_stop_trim: true } }
 * ```
 */
export function buildGenerateRequest(input: GenerateRequestInput): Body {
  const d = input.defaults ?? DEFAULT_SAMPLING;
  const s = input.sampling;
  // SGLang refuses input + max_new_tokens >= context (0.5 releases; see the shared contract), so
  // a prompt of n tokens may ask context − n − 1 at most; one that leaves none is the harness's
  // context overflow, not an engine 400.
  const room = maxNewTokensRoom(input.inputIds.length, input.contextLength);
  if (room < 1) {
    throw new SamplingParamError(
      "messages",
      `prompt is ${input.inputIds.length} tokens, the context is ${input.contextLength}: no room to generate`,
    );
  }
  const sampling: Body = {
    temperature: s.temperature ?? d.temperature,
    top_p: s.top_p ?? d.top_p,
    top_k: s.top_k ?? d.top_k,
    min_p: s.min_p ?? d.min_p,
    max_new_tokens: Math.min(s.max_tokens ?? d.max_new_tokens, room),
    skip_special_tokens: false,
    spaces_between_special_tokens: false,
    no_stop_trim: true,
  };
  if (s.stop) sampling.stop = [...s.stop];
  if (s.stop_token_ids) sampling.stop_token_ids = [...s.stop_token_ids];
  if (s.frequency_penalty !== undefined) sampling.frequency_penalty = s.frequency_penalty;
  if (s.presence_penalty !== undefined) sampling.presence_penalty = s.presence_penalty;
  if (s.repetition_penalty !== undefined) sampling.repetition_penalty = s.repetition_penalty;
  if (s.seed !== undefined) sampling.sampling_seed = s.seed;
  const body: Body = {
    input_ids: [...input.inputIds],
    sampling_params: sampling,
    rid: input.rid,
    return_logprob: true,
    logprob_start_len: -1,
    stream: false,
  };
  if (input.imageData && input.imageData.length > 0) body.image_data = [...input.imageData];
  if (input.routedExpertsStart !== undefined) {
    body.return_routed_experts = true;
    body.routed_experts_start_len = input.routedExpertsStart;
  }
  return body;
}

/**
 * A request id: `<session>-t<turn>-<8 hex>` (unique even when a harness retries a turn).
 *
 * @example
 * ```ts
 * newRid("s-1", 3); // "s-1-t3-9f2c01ab"
 * ```
 */
export function newRid(sessionId: string, turn: number): string {
  return `${sessionId}-t${turn}-${randomBytes(4).toString("hex")}`;
}

/** How the engine ended a turn (SGLang's `meta_info.finish_reason` dict). */
export interface GenerateFinish {
  type: "stop" | "length" | "abort";
  /** The stop token id or stop string that matched (`type: "stop"`), else null. */
  matched: number | string | null;
  /** The abort message (`type: "abort"`), else null. */
  message: string | null;
}

/** A parsed `/generate` reply. */
export interface GenerateResult {
  rid: string | null;
  outputIds: number[];
  /** One logprob per output id, as sampled (after temperature/top-p; SGLang ≥ PR #2664). */
  logprobs: number[];
  finish: GenerateFinish;
  weightVersion: string | null;
  cachedTokens: number | null;
  promptTokens: number | null;
  completionTokens: number | null;
  /** The prompt ids the server ran, when it returned them (`return_prompt_token_ids`). */
  promptTokenIds: number[] | null;
  /**
   * Prompt tokens the engine put in front of the sampled ids in `output_ids` (0 or absent: the plain form).
   * Builds that filled `output_ids` from the detokenizer's `decode_ids` (sglang issues #10896,
   * #17240) do so; the ids above come from the logprobs either way.
   */
  outputIdsPromptTail?: number;
}

const isObj = (v: unknown): v is Body => typeof v === "object" && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

function logprobValue(v: unknown, field: string): number {
  // Forks clamp -inf to a large negative number; JSON cannot carry -inf itself.
  if (typeof v !== "number" || Number.isNaN(v))
    throw new GenerateResponseError(field, "logprob is not a number");
  return v;
}

/** `[logprob, id, text]` triples, tuples as dicts, or the parallel `_val`/`_idx` arrays. */
function readOutputLogprobs(meta: Body): { ids: number[]; logprobs: number[] } {
  const entries = meta.output_token_logprobs;
  if (Array.isArray(entries)) {
    const ids: number[] = [];
    const logprobs: number[] = [];
    entries.forEach((e, i) => {
      const field = `meta_info.output_token_logprobs[${i}]`;
      const lp = Array.isArray(e) ? e[0] : isObj(e) ? e.logprob : undefined;
      const id = Array.isArray(e) ? e[1] : isObj(e) ? (e.token_id ?? e.id) : undefined;
      if (!isId(id)) throw new GenerateResponseError(field, "token id missing or not an integer");
      ids.push(id);
      logprobs.push(logprobValue(lp, field));
    });
    return { ids, logprobs };
  }
  const val = meta.output_token_logprobs_val;
  const idx = meta.output_token_logprobs_idx;
  if (Array.isArray(val) && Array.isArray(idx)) {
    if (val.length !== idx.length) {
      throw new GenerateResponseError(
        "meta_info.output_token_logprobs_val",
        `has ${val.length} entries, _idx has ${idx.length}`,
      );
    }
    return {
      ids: idx.map((id, i) => {
        if (!isId(id))
          throw new GenerateResponseError(`meta_info.output_token_logprobs_idx[${i}]`, "not an id");
        return id;
      }),
      logprobs: val.map((v, i) => logprobValue(v, `meta_info.output_token_logprobs_val[${i}]`)),
    };
  }
  throw new GenerateResponseError("meta_info.output_token_logprobs", "missing (was return_logprob sent?)");
}

function readFinish(raw: unknown): GenerateFinish {
  if (!isObj(raw) || typeof raw.type !== "string") {
    throw new GenerateResponseError("meta_info.finish_reason", "missing: the request did not finish");
  }
  const matched = typeof raw.matched === "number" || typeof raw.matched === "string" ? raw.matched : null;
  const message = typeof raw.message === "string" ? raw.message : null;
  if (raw.type === "stop" || raw.type === "length" || raw.type === "abort") {
    return { type: raw.type, matched, message };
  }
  throw new GenerateResponseError("meta_info.finish_reason.type", `unknown value "${raw.type}"`);
}

const optInt = (v: unknown): number | null =>
  typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : null;

/**
 * Parses a non-streaming `/generate` reply. The sampled ids come from
 * `meta_info.output_token_logprobs` (the TITO source of truth) and must agree with the top-level
 * `output_ids` when both are present. One disagreement is recognised: given the prompt, an
 * `output_ids` that is the prompt's last 1–5 tokens followed by exactly the logprob ids (builds
 * that returned the detokenizer's `decode_ids`, sglang #10896/#17240) is accepted and counted in
 * `outputIdsPromptTail`; any other misalignment fails hard rather than train on a guess.
 *
 * @example
 * ```ts
 * parseGenerateResponse({
 *   text: " fishing", output_ids: [7640, 287],
 *   meta_info: { id: "r1", finish_reason: { type: "length", length: 2 }, cached_tokens: 0,
 *                output_token_logprobs: [[-0.1, 7640, null], [-0.2, 287, null]], weight_version: "default" },
 * });
 * // { outputIds: [7640, 287], logprobs: [-0.1, -0.2], finish: { type: "length", ... }, weightVersion: "default", outputIdsPromptTail: 0, ... }
 * ```
 */
export function parseGenerateResponse(body: unknown, promptIds: readonly number[] = []): GenerateResult {
  if (Array.isArray(body)) throw new GenerateResponseError("(root)", "is a batch; one result was expected");
  if (!isObj(body)) throw new GenerateResponseError("(root)", "is not a JSON object");
  const meta = body.meta_info;
  if (!isObj(meta)) throw new GenerateResponseError("meta_info", "missing");
  const { ids, logprobs } = readOutputLogprobs(meta);
  const top = body.output_ids ?? body.token_ids;
  let outputIdsPromptTail = 0;
  if (top !== undefined) {
    const same = Array.isArray(top) && top.length === ids.length && top.every((id, i) => id === ids[i]);
    if (!same) {
      // The prompt the server ran when it says (image pads expanded), else the one sent.
      const ran = Array.isArray(body.prompt_token_ids) ? (body.prompt_token_ids as number[]) : promptIds;
      outputIdsPromptTail = Array.isArray(top) ? promptTailPrefix(ran, top, ids) : 0;
      if (outputIdsPromptTail === 0) {
        throw new GenerateResponseError(
          "output_ids",
          `do not match meta_info.output_token_logprobs (${Array.isArray(top) ? top.length : "?"} vs ${ids.length} ids)`,
        );
      }
    }
  }
  const completionTokens = optInt(meta.completion_tokens);
  if (completionTokens !== null && completionTokens !== ids.length) {
    throw new GenerateResponseError(
      "meta_info.completion_tokens",
      `is ${completionTokens} but ${ids.length} token logprobs came back`,
    );
  }
  const prompt = body.prompt_token_ids;
  return {
    rid: typeof meta.id === "string" ? meta.id : null,
    outputIds: ids,
    logprobs,
    finish: readFinish(meta.finish_reason),
    weightVersion:
      typeof meta.weight_version === "string" || typeof meta.weight_version === "number"
        ? String(meta.weight_version)
        : null,
    cachedTokens: optInt(meta.cached_tokens),
    promptTokens: optInt(meta.prompt_tokens),
    completionTokens,
    promptTokenIds: Array.isArray(prompt) && prompt.every(isId) ? (prompt as number[]) : null,
    outputIdsPromptTail,
  };
}

/**
 * The OpenAI `finish_reason` for a parsed turn: `tool_calls` when the parser found calls in a turn
 * that stopped, `stop`, `length`. `abort` (weight update, `/abort_request`) has no OpenAI
 * equivalent; the proxy answers the harness with a retryable error instead of a partial turn.
 *
 * @example
 * ```ts
 * openaiFinishReason({ type: "stop", matched: 151645, message: null }, true); // "tool_calls"
 * ```
 */
export function openaiFinishReason(
  finish: GenerateFinish,
  hasToolCalls: boolean,
): "stop" | "length" | "tool_calls" | "abort" {
  if (finish.type === "stop") return hasToolCalls ? "tool_calls" : "stop";
  return finish.type;
}

/**
 * The sampled text the harness should see, before parsing: special tokens kept (the parsers need
 * `<think>`, `<tool_call>`), the matched end-of-turn/stop token dropped, a matched stop string
 * trimmed (SGLang keeps it in the ids because we send `no_stop_trim`; OpenAI clients expect it
 * gone). For display only: this text is never encoded again.
 *
 * @example
 * ```ts
 * visibleOutputText(tok, [40, 1075, 19948, 151645], { type: "stop", matched: 151645, message: null }); // "I like fishing"
 * ```
 */
export function visibleOutputText(
  tok: Pick<ChatTokenizer, "decode" | "eosTokenIds">,
  outputIds: readonly number[],
  finish: GenerateFinish,
): string {
  let ids = outputIds;
  const last = ids.at(-1);
  if (
    last !== undefined &&
    finish.type === "stop" &&
    (last === finish.matched || (typeof finish.matched !== "string" && tok.eosTokenIds.includes(last)))
  ) {
    ids = ids.slice(0, -1);
  }
  let text = tok.decode(ids);
  if (finish.type === "stop" && typeof finish.matched === "string" && text.endsWith(finish.matched)) {
    text = text.slice(0, text.length - finish.matched.length);
  }
  return text;
}

/**
 * Image inputs of the messages in prompt order, as `/generate`'s `image_data` list (URLs or
 * `data:` URIs, passed through: SGLang loads both). The chat template renders one placeholder per
 * image part (Qwen-VL: `<|vision_start|><|image_pad|><|vision_end|>`); SGLang's processor expands
 * each pad to the image's patch count, so the prompt it runs is longer than the ids sent, and the
 * turn must record the server's `prompt_token_ids` (`return_prompt_token_ids`). See
 * docs/token-mode.md, "Images".
 *
 * @example
 * ```ts
 * collectImageData([{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png;base64,AAA" } }] }]);
 * // ["data:image/png;base64,AAA"]
 * ```
 */
export function collectImageData(messages: readonly ChatMessage[]): string[] {
  const out: string[] = [];
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((part, j) => {
      if (part.type !== "image_url" && part.type !== "image") return;
      const ref = part.image_url;
      const url =
        typeof ref === "string" ? ref : isObj(ref) && typeof ref.url === "string" ? ref.url : undefined;
      if (!url) throw new SamplingParamError(`messages[${i}].content[${j}].image_url.url`, "missing");
      out.push(url);
    });
  });
  return out;
}
