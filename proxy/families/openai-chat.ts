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
import { badField, isObject, objects } from "../json";
import { choiceOf, type FlatToolCall, mergeSystem, refuseTooDeep, sse } from "./common";
import { DeltaWriter } from "./delta-writer";
import type { ErrorInfo, Family, ParsedRequest } from "./types";

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
    refuseTooDeep(body);
    validateChatRequest(body);
    checkMessages(body.messages as unknown[]);
    checkTools(body.tools);
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
  stream: (req, meta) => new ChatStream(req, meta),
  errorBody: (e: ErrorInfo) => openAiError(e.message, e.type, e.code, e.param) as unknown as JsonObject,
};

/**
 * The messages' parts OpenAI's API requires to be objects, checked before anything reads them
 * (400 naming the first that is not): `content` is a string, null, or a list of content parts,
 * each an object with a string `type` (and a string `text` in a text part); `tool_calls` is absent, null, or a list of `{function: {name, arguments?}}`.
 * The other families build these themselves; this one passes the harness's on, and token mode's
 * rendering failed as an internal error on a part or a call that was `null`, and on a part whose
 * `type` or `text` was an object (the fuzzer's `{"toString": 1}`, which no string conversion
 * survives).
 */
function checkMessages(messages: unknown[]): void {
  messages.forEach((m, i) => {
    const message = m as JsonObject;
    const content = message.content;
    if (content !== undefined && content !== null && typeof content !== "string") {
      if (!Array.isArray(content))
        throw badField(`messages[${i}].content`, "must be a string, a list of content parts or null");
      content.forEach((part, j) => {
        if (!isObject(part))
          throw badField(`messages[${i}].content[${j}]`, "must be an object (a content part)");
        if (typeof part.type !== "string")
          throw badField(`messages[${i}].content[${j}].type`, "required string (text, image_url, …)");
        const text = part.text;
        if ((part.type === "text" || part.type === "input_text") && text !== undefined && text !== null)
          if (typeof text !== "string")
            throw badField(`messages[${i}].content[${j}].text`, "must be a string");
      });
    }
    const calls = message.tool_calls;
    if (calls === undefined || calls === null) return;
    if (!Array.isArray(calls)) throw badField(`messages[${i}].tool_calls`, "must be a list of tool calls");
    calls.forEach((call, j) => {
      const at = `messages[${i}].tool_calls[${j}]`;
      if (!isObject(call)) throw badField(at, "must be an object");
      if (!isObject(call.function)) throw badField(`${at}.function`, "required object");
      if (typeof call.function.name !== "string") throw badField(`${at}.function.name`, "required string");
      const args = call.function.arguments;
      if (args !== undefined && args !== null && typeof args !== "string" && !isObject(args))
        throw badField(`${at}.function.arguments`, "must be a JSON string");
    });
  });
}

/**
 * `tools` is absent, null or a list of function tools, each `{function: {name, …}}` (what OpenAI's
 * API requires and every engine reads); 400 naming the first that is not. Token mode renders each
 * tool's `function`, and a tool without one failed as an internal error.
 */
function checkTools(tools: unknown): void {
  if (tools === undefined || tools === null) return;
  if (!Array.isArray(tools)) throw badField("tools", "must be a list of tools");
  tools.forEach((tool, i) => {
    if (!isObject(tool)) throw badField(`tools[${i}]`, "must be an object");
    if (!isObject(tool.function)) throw badField(`tools[${i}].function`, "required object");
    if (typeof tool.function.name !== "string")
      throw badField(`tools[${i}].function.name`, "required string");
  });
}

/**
 * OpenAI chunks: role chunk, reasoning/content/tool-call deltas, the finish chunk, the usage chunk
 * when `stream_options.include_usage`, then `data: [DONE]`.
 *
 * @example
 * ```ts
 * const w = new ChatStream(req, { id: "chatcmpl-1", created: 0 });
 * w.start() + w.delta({ kind: "text", text: "hi" }) + w.finish(completion);
 * ```
 */
class ChatStream extends DeltaWriter {
  readonly contentType = "text/event-stream";
  private readonly includeUsage: boolean;
  private readonly base: JsonObject;
  /** The index the next tool call gets. */
  private toolIndex = 0;

  constructor(req: ParsedRequest, meta: { id: string; created: number }) {
    super();
    this.includeUsage = req.reply.includeUsage === true;
    this.base = {
      id: meta.id,
      object: "chat.completion.chunk",
      created: meta.created,
      model: req.requestedModel,
    };
  }

  start(): string {
    return this.chunk({ role: "assistant", content: "" });
  }

  protected onReasoningDelta(text: string): string {
    return this.chunk({ reasoning_content: text });
  }

  protected onTextDelta(text: string, logprobs?: unknown): string {
    return this.chunk({ content: text }, logprobs ? { logprobs } : {});
  }

  protected onToolCall(call: FlatToolCall): string {
    const index = this.toolIndex++;
    return this.chunk({
      tool_calls: [
        { index, id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } },
      ],
    });
  }

  finish(completion: JsonObject): string {
    const choice = choiceOf(completion);
    let out = this.chunk({}, { finish_reason: choice.finish_reason ?? "stop" });
    if (this.includeUsage) out += sse({ ...this.base, choices: [], usage: completion.usage ?? null });
    return out + sse("[DONE]");
  }

  error(e: ErrorInfo): string {
    return sse(openAiError(e.message, e.type, e.code, e.param)) + sse("[DONE]");
  }

  private chunk(delta: JsonObject, extra: JsonObject = {}): string {
    return sse({
      ...this.base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: null, ...extra }],
      // With include_usage OpenAI puts `usage: null` on every chunk but the last one.
      ...(this.includeUsage ? { usage: null } : {}),
    });
  }
}
