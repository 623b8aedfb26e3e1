/**
 * What the harness gets back in the OpenAI Chat Completions format: the engine's completion with
 * the engine's internals removed, either as one JSON body or as a synthesised SSE stream (the
 * engine is always called non-streaming, because token ids only come back that way).
 *
 * @module
 */
import type { JsonObject } from "../protocol";
import { SGLANG_CHOICE_EXTENSIONS } from "./engines/sglang-openai";

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The completion as the harness sees it: `model` is the name the harness asked for, SGLang's
 * token extensions are removed, and `logprobs` is null unless the harness asked for logprobs
 * (the proxy always asks the engine for them, the harness should not pay for that).
 *
 * @example
 * ```ts
 * const body = toClientCompletion(engineJson, { requestedModel: "gpt-4o", wantLogprobs: false });
 * ```
 */
export function toClientCompletion(
  raw: JsonObject,
  opts: { requestedModel: string; wantLogprobs: boolean },
): JsonObject {
  const choices = Array.isArray(raw.choices) ? raw.choices : [];
  return {
    ...raw,
    model: opts.requestedModel,
    choices: choices.map((c) => {
      if (!isObject(c)) return c;
      const out: JsonObject = { ...c };
      for (const key of SGLANG_CHOICE_EXTENSIONS) delete out[key];
      // OpenAI sends `logprobs: null` when they were not requested; clients expect the key.
      if (!opts.wantLogprobs) out.logprobs = null;
      return out;
    }),
  };
}

/** Options of {@link completionToSseEvents}. */
export interface SseOptions {
  /** `stream_options.include_usage`: add a final chunk with `usage` and empty `choices`. */
  includeUsage: boolean;
  /** Put the choice's logprobs on the content chunk. */
  wantLogprobs: boolean;
}

/**
 * Turns a complete (client-shaped) chat completion into the `data:` payloads of an OpenAI SSE
 * stream: role chunk, reasoning chunk (if any), content chunk (if any), tool-call chunk (if any),
 * final chunk with `finish_reason`, usage chunk (if asked), then `[DONE]`.
 *
 * @example
 * ```ts
 * for (const data of completionToSseEvents(body, { includeUsage: false, wantLogprobs: false })) {
 *   res.write(`data: ${data}\n\n`);
 * }
 * ```
 */
export function completionToSseEvents(completion: JsonObject, opts: SseOptions): string[] {
  const choice =
    Array.isArray(completion.choices) && isObject(completion.choices[0]) ? completion.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const base = {
    id: completion.id,
    object: "chat.completion.chunk",
    created: completion.created,
    model: completion.model,
    ...(completion.system_fingerprint !== undefined
      ? { system_fingerprint: completion.system_fingerprint }
      : {}),
  };
  // With include_usage OpenAI puts `usage: null` on every chunk but the last one.
  const usageField = opts.includeUsage ? { usage: null } : {};
  const chunk = (delta: JsonObject, extra: JsonObject = {}): string =>
    JSON.stringify({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
      ...usageField,
    });

  const events: string[] = [chunk({ role: "assistant", content: "" })];
  if (typeof message.reasoning_content === "string" && message.reasoning_content.length > 0) {
    events.push(chunk({ reasoning_content: message.reasoning_content }));
  }
  if (typeof message.content === "string" && message.content.length > 0) {
    const logprobs = opts.wantLogprobs && choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {};
    events.push(chunk({ content: message.content }, logprobs));
  }
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
    const toolCalls = message.tool_calls.map((call, index) => {
      const c = isObject(call) ? call : {};
      return { index, id: c.id, type: c.type ?? "function", function: c.function };
    });
    events.push(chunk({ tool_calls: toolCalls }));
  }
  events.push(chunk({}, { finish_reason: choice.finish_reason ?? "stop" }));
  if (opts.includeUsage) {
    events.push(JSON.stringify({ ...base, choices: [], usage: completion.usage ?? null }));
  }
  events.push("[DONE]");
  return events;
}
