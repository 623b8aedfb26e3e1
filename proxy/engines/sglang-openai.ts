/**
 * The `sglang-openai` engine: SGLang's OpenAI `/v1/chat/completions` with token-id extensions.
 *
 * Two response shapes carry the ids we need:
 * - SGLang ≥ 0.5.13: `choices[0].prompt_token_ids` and `choices[0].meta_info.output_token_logprobs`
 *   (`[[logprob, id, text|null], …]`), asked for with `return_prompt_token_ids` / `return_meta_info`.
 * - Polar's patched 0.5.10: `choices[0].input_token_ids` and `choices[0].logprobs.content[]` entries
 *   that carry `token_id` next to `logprob`.
 *
 * Everything here is pure (no I/O) so the normalisation is unit-tested on fixtures.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { EngineContractError, ProxyHttpError } from "../errors";

/** Header that gives an SGLang router session affinity (the sim engine also seeds from it). */
export const ROUTING_KEY_HEADER = "X-SMG-Routing-Key";

/** The request as it goes to the engine, plus the headers that go with it. */
export interface ServedRequest {
  body: JsonObject;
  headers: Record<string, string>;
}

/** Token-level facts pulled out of one engine response. */
export interface NormalizedCompletion {
  prompt_ids: number[];
  response_ids: number[];
  /** One logprob per response id, or null when the engine gave none aligned with the ids. */
  response_logprobs: number[] | null;
  finish_reason: string | null;
  weight_version: string | null;
  cached_tokens: number | null;
  /** `choices[0].message` as the engine returned it. */
  message: JsonObject | null;
}

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const isTokenId = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;
const isLogprob = (v: unknown): v is number => typeof v === "number" && !Number.isNaN(v);

/**
 * Builds the request served to SGLang from the one the harness sent.
 *
 * - `model` is forced to the served model (harnesses ask for whatever name they were configured with);
 * - upstream is always non-streaming: SGLang returns token ids only on non-streaming chat calls;
 * - `logprobs`, `return_prompt_token_ids`, `return_meta_info` are switched on;
 * - `max_completion_tokens` (newer OpenAI name) becomes `max_tokens`, which SGLang reads.
 *
 * @example
 * ```ts
 * const served = buildSglangChatRequest({ model: "gpt-4o", messages }, { modelServed: "Qwen/Qwen3-8B", sessionId: "s1" });
 * served.body.model; // "Qwen/Qwen3-8B"
 * served.headers["X-SMG-Routing-Key"]; // "s1"
 * ```
 */
export function buildSglangChatRequest(
  original: JsonObject,
  opts: { modelServed: string; sessionId: string },
): ServedRequest {
  const body: JsonObject = { ...original };
  body.model = opts.modelServed;
  body.stream = false;
  delete body.stream_options;
  body.logprobs = true;
  body.return_prompt_token_ids = true;
  body.return_meta_info = true;
  if (body.max_completion_tokens !== undefined) {
    if (body.max_tokens === undefined) body.max_tokens = body.max_completion_tokens;
    delete body.max_completion_tokens;
  }
  return {
    body,
    headers: { "content-type": "application/json", [ROUTING_KEY_HEADER]: opts.sessionId },
  };
}

/**
 * Checks what the harness sent before anything goes upstream; throws a 400 naming the field.
 *
 * @example
 * ```ts
 * validateChatRequest({ messages: [] }); // throws: messages must not be empty
 * ```
 */
export function validateChatRequest(body: unknown): asserts body is JsonObject {
  const bad = (param: string, message: string) =>
    new ProxyHttpError(400, "invalid_request_error", "invalid_request", `${param}: ${message}`, param);
  if (!isObject(body)) throw bad("(body)", "must be a JSON object");
  if (body.messages === undefined) throw bad("messages", "required");
  if (!Array.isArray(body.messages)) throw bad("messages", "must be an array");
  if (body.messages.length === 0) throw bad("messages", "must not be empty");
  body.messages.forEach((m, i) => {
    if (!isObject(m)) throw bad(`messages[${i}]`, "must be an object");
    if (typeof m.role !== "string") throw bad(`messages[${i}].role`, "required string");
  });
  if (body.model !== undefined && typeof body.model !== "string") throw bad("model", "must be a string");
  // One sampled sequence per recorded call: the trajectory has exactly one response per completion.
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw bad("n", "only n=1 is supported");
  if (body.stream !== undefined && typeof body.stream !== "boolean") throw bad("stream", "must be a boolean");
}

function idList(value: unknown, field: string): number[] {
  if (!Array.isArray(value)) throw new EngineContractError(field, "is not an array");
  value.forEach((id, i) => {
    if (!isTokenId(id)) throw new EngineContractError(`${field}[${i}]`, "is not a token id");
  });
  return value as number[];
}

/** Output ids + logprobs from `meta_info.output_token_logprobs` (tuples or `{logprob, token_id}` dicts). */
function fromOutputTokenLogprobs(
  entries: unknown[],
  field: string,
): { ids: number[]; logprobs: number[] | null } {
  const ids: number[] = [];
  const logprobs: Array<number | null> = [];
  entries.forEach((entry, i) => {
    let id: unknown;
    let lp: unknown;
    if (Array.isArray(entry)) [lp, id] = entry;
    else if (isObject(entry)) {
      id = entry.token_id;
      lp = entry.logprob;
    }
    if (!isTokenId(id)) throw new EngineContractError(`${field}[${i}]`, "has no token id");
    ids.push(id);
    logprobs.push(isLogprob(lp) ? lp : null);
  });
  return { ids, logprobs: logprobs.every(isLogprob) ? (logprobs as number[]) : null };
}

/**
 * Logprobs from `logprobs.content[]`, kept only when they line up one-to-one with `ids`: same length
 * and, where an entry carries `token_id`, the same id. Otherwise null — never a mixed list.
 */
function alignedContentLogprobs(content: unknown, ids: number[]): number[] | null {
  if (!Array.isArray(content) || content.length !== ids.length) return null;
  const out: number[] = [];
  for (let i = 0; i < content.length; i++) {
    const entry = content[i];
    if (!isObject(entry) || !isLogprob(entry.logprob)) return null;
    if (entry.token_id !== undefined && entry.token_id !== ids[i]) return null;
    out.push(entry.logprob);
  }
  return out;
}

/**
 * Pulls prompt ids, response ids, logprobs and provenance out of an SGLang chat completion.
 * Throws {@link EngineContractError} naming the missing field when the ids are absent.
 *
 * Sources, in order:
 * - prompt ids: `choices[0].prompt_token_ids` → `choices[0].input_token_ids` → `choices[0].meta_info.input_token_ids`;
 * - response ids: `choices[0].meta_info.output_token_logprobs[*][1]` → `choices[0].token_ids` →
 *   `choices[0].logprobs.content[*].token_id`;
 * - logprobs: from the same source as the ids, or `logprobs.content[*].logprob` when aligned; else null.
 *
 * @example
 * ```ts
 * const n = normalizeSglangChatResponse(await res.json());
 * n.prompt_ids.length; n.response_ids; n.response_logprobs; // aligned or null
 * ```
 */
export function normalizeSglangChatResponse(raw: unknown): NormalizedCompletion {
  if (!isObject(raw)) throw new EngineContractError("(body)", "is not a JSON object");
  if (!Array.isArray(raw.choices) || raw.choices.length === 0) throw new EngineContractError("choices[0]");
  const choice = raw.choices[0];
  if (!isObject(choice)) throw new EngineContractError("choices[0]", "is not an object");
  const meta = isObject(choice.meta_info) ? choice.meta_info : null;
  const logprobsObj = isObject(choice.logprobs) ? choice.logprobs : null;

  let prompt_ids: number[];
  if (choice.prompt_token_ids != null)
    prompt_ids = idList(choice.prompt_token_ids, "choices[0].prompt_token_ids");
  else if (choice.input_token_ids != null)
    prompt_ids = idList(choice.input_token_ids, "choices[0].input_token_ids");
  else if (meta?.input_token_ids != null)
    prompt_ids = idList(meta.input_token_ids, "choices[0].meta_info.input_token_ids");
  else throw new EngineContractError("choices[0].prompt_token_ids");

  let response_ids: number[];
  let response_logprobs: number[] | null;
  const content = logprobsObj?.content;
  if (Array.isArray(meta?.output_token_logprobs)) {
    const got = fromOutputTokenLogprobs(
      meta.output_token_logprobs,
      "choices[0].meta_info.output_token_logprobs",
    );
    response_ids = got.ids;
    response_logprobs = got.logprobs;
  } else if (choice.token_ids != null) {
    response_ids = idList(choice.token_ids, "choices[0].token_ids");
    response_logprobs = alignedContentLogprobs(content, response_ids);
  } else if (
    Array.isArray(content) &&
    content.length > 0 &&
    content.every((e) => isObject(e) && isTokenId(e.token_id))
  ) {
    response_ids = content.map((e) => (e as JsonObject).token_id as number);
    response_logprobs = alignedContentLogprobs(content, response_ids);
  } else {
    throw new EngineContractError("choices[0].meta_info.output_token_logprobs");
  }

  const metaFinish = isObject(meta?.finish_reason) ? meta.finish_reason.type : undefined;
  const finish_reason =
    typeof choice.finish_reason === "string"
      ? choice.finish_reason
      : typeof metaFinish === "string"
        ? metaFinish
        : null;
  const topMeta = isObject(raw.metadata) ? raw.metadata : null;
  const wv = meta?.weight_version ?? topMeta?.weight_version;
  const weight_version = typeof wv === "string" || typeof wv === "number" ? String(wv) : null;
  const usage = isObject(raw.usage) ? raw.usage : null;
  const usageDetails = isObject(usage?.prompt_tokens_details) ? usage.prompt_tokens_details : null;
  const cached = meta?.cached_tokens ?? usageDetails?.cached_tokens;
  const cached_tokens = isTokenId(cached) ? cached : null;
  const message = isObject(choice.message) ? choice.message : null;

  return {
    prompt_ids,
    response_ids,
    response_logprobs,
    finish_reason,
    weight_version,
    cached_tokens,
    message,
  };
}

/** SGLang fields that carry token data; they never reach the harness. */
export const SGLANG_CHOICE_EXTENSIONS = [
  "prompt_token_ids",
  "input_token_ids",
  "token_ids",
  "meta_info",
] as const;

/**
 * The engine response as stored on the completion record: the bulky id arrays are dropped (they
 * live on the record as `prompt_ids`/`response_ids`/`response_logprobs`), the rest of `meta_info`
 * (finish details, cached tokens, latency, weight version) is kept.
 *
 * @example
 * ```ts
 * record.response = recordableSglangResponse(raw);
 * ```
 */
export function recordableSglangResponse(raw: JsonObject): JsonObject {
  const choices = Array.isArray(raw.choices) ? raw.choices : [];
  return {
    ...raw,
    choices: choices.map((c) => {
      if (!isObject(c)) return c;
      const { prompt_token_ids: _p, input_token_ids: _i, token_ids: _t, meta_info, ...rest } = c;
      if (!isObject(meta_info)) return rest;
      const { output_token_logprobs: _o, input_token_ids: _mi, ...metaRest } = meta_info;
      return { ...rest, meta_info: metaRest };
    }),
  };
}
