/**
 * OpenAI Chat Completions (`POST /v1/chat/completions`): already the internal form, so the
 * transform only merges system/developer messages, and the reply restores the client's model name
 * and hides logprobs the client did not ask for.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { validateChatRequest } from "../engines/sglang-openai";
import { openAiError } from "../errors";
import { isObject, objects } from "../json";
import { choiceOf, mergeSystem, sse } from "./common";
import type { DeltaEvent, ErrorInfo, Family, ParsedRequest, StreamWriter } from "./types";

/**
 * The OpenAI Chat Completions family.
 *
 * @example
 * ```ts
 * const req = openAiChat.parse(body, ctx);
 * const native = openAiChat.respond(completion, req);
 * ```
 */
export const openAiChat: Family = {
  api: "openai_chat",
  parse(body): ParsedRequest {
    validateChatRequest(body);
    const chat: JsonObject = { ...body, messages: mergeSystem(objects(body.messages)) };
    delete chat.stream;
    delete chat.stream_options;
    const streamOptions = isObject(body.stream_options) ? body.stream_options : {};
    return {
      chat,
      stream: body.stream === true,
      requestedModel: typeof body.model === "string" ? body.model : null,
      reply: { includeUsage: streamOptions.include_usage === true, wantLogprobs: body.logprobs === true },
    };
  },
  respond(completion, req) {
    const choices = objects(completion.choices);
    return {
      ...completion,
      model: req.requestedModel ?? completion.model ?? null,
      choices: choices.map((c) => (req.reply.wantLogprobs ? c : { ...c, logprobs: null })),
    };
  },
  stream: chatStream,
  errorBody: (e: ErrorInfo) => openAiError(e.message, e.type, e.code, e.param) as unknown as JsonObject,
};

/**
 * OpenAI chunks: role chunk, reasoning/content/tool-call deltas, the finish chunk, the usage chunk
 * when `stream_options.include_usage`, then `data: [DONE]`.
 */
function chatStream(req: ParsedRequest, meta: { id: string; created: number }): StreamWriter {
  const includeUsage = req.reply.includeUsage === true;
  const base = {
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: req.requestedModel,
  };
  // With include_usage OpenAI puts `usage: null` on every chunk but the last one.
  const usageField = includeUsage ? { usage: null } : {};
  const chunk = (delta: JsonObject, extra: JsonObject = {}) =>
    sse({
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
      ...usageField,
    });
  let toolIndex = 0;
  return {
    contentType: "text/event-stream",
    start: () => chunk({ role: "assistant", content: "" }),
    delta(ev: DeltaEvent) {
      if (ev.kind === "reasoning") return chunk({ reasoning_content: ev.text });
      if (ev.kind === "text")
        return chunk({ content: ev.text }, ev.logprobs ? { logprobs: ev.logprobs } : {});
      const index = toolIndex++;
      return chunk({
        tool_calls: [
          { index, id: ev.id, type: "function", function: { name: ev.name, arguments: ev.arguments } },
        ],
      });
    },
    finish(completion) {
      const choice = choiceOf(completion);
      let out = chunk({}, { finish_reason: choice.finish_reason ?? "stop" });
      if (includeUsage) out += sse({ ...base, choices: [], usage: completion.usage ?? null });
      return out + sse("[DONE]");
    },
    error: (e) => sse(openAiError(e.message, e.type, e.code, e.param)) + sse("[DONE]"),
  };
}
