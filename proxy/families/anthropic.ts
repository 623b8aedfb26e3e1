/**
 * Anthropic Messages (`POST /v1/messages`): system blocks, text/image/document/tool_use/
 * tool_result/thinking blocks, tools with `input_schema`, `tool_choice` (auto/any/tool/none), the
 * `thinking` switch, `stop_sequences`; replies as a `message` with thinking/text/tool_use blocks
 * and Anthropic's ordered SSE events.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import {
  badField,
  decodeReasoning,
  encodeReasoning,
  isObject,
  objects,
  parseArguments,
  randomId,
} from "../json";
import {
  asText,
  choiceOf,
  type FlatToolCall,
  messageOf,
  partsContent,
  refuseTooDeep,
  sse,
  toolCallsOf,
  usageOf,
} from "./common";
import type { DeltaEvent, ErrorInfo, Family, ParsedRequest, StreamWriter } from "./types";

/** Claude Code puts a billing line in the system prompt; it means nothing to another model. */
const BILLING_LINE = /^x-anthropic-billing-header:.*$/gm;

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  504: "timeout_error",
  529: "overloaded_error",
};

function mediaPart(block: JsonObject, field: string): JsonObject {
  const source = isObject(block.source) ? block.source : null;
  if (!source) throw badField(`${field}.source`, "required object");
  if (source.type === "base64") {
    if (typeof source.data !== "string") throw badField(`${field}.source.data`, "required string");
    const url = `data:${asText(source.media_type, "application/octet-stream")};base64,${source.data}`;
    return block.type === "image"
      ? { type: "image_url", image_url: { url } }
      : { type: "file", file: { file_data: url } };
  }
  if (source.type === "url") {
    if (typeof source.url !== "string") throw badField(`${field}.source.url`, "required string");
    return block.type === "image"
      ? { type: "image_url", image_url: { url: source.url } }
      : { type: "file", file: { file_url: source.url } };
  }
  if (source.type === "text" && typeof source.data === "string") return { type: "text", text: source.data };
  if (source.type === "content") {
    // A document made of text blocks is one text: its blocks are lines of it.
    const text = textOfBlocks(source.content);
    return {
      type: "text",
      text: typeof text === "string" ? text : text.map((p) => String(p.text)).join("\n"),
    };
  }
  throw badField(`${field}.source.type`, `unsupported source type '${asText(source.type)}'`);
}

/** The text blocks of a content list as text parts (a string stays a string). */
function textOfBlocks(content: unknown): string | JsonObject[] {
  if (typeof content === "string") return content;
  return partsContent(
    objects(content)
      .filter((b) => b.type === "text" && typeof b.text === "string")
      .map((b) => ({ type: "text", text: b.text })),
  );
}

/** Prefixes a tool result's text (a string or text parts) with `lead`. */
function prefixed(lead: string, content: string | JsonObject[]): string | JsonObject[] {
  if (typeof content === "string") return `${lead}${content}`;
  const [first, ...rest] = content;
  return first ? [{ ...first, text: `${lead}${asText(first.text)}` }, ...rest] : lead;
}

/** A content block list → OpenAI content parts (text, images, documents). */
function contentParts(blocks: JsonObject[], field: string): JsonObject[] {
  const parts: JsonObject[] = [];
  blocks.forEach((b, i) => {
    if (b.type === "text") parts.push({ type: "text", text: asText(b.text) });
    else if (b.type === "image" || b.type === "document") parts.push(mediaPart(b, `${field}[${i}]`));
  });
  return parts;
}

function convertMessages(body: JsonObject): JsonObject[] {
  if (!Array.isArray(body.messages)) throw badField("messages", "required array");
  const out: JsonObject[] = [];
  // Each system block on its own, without Claude Code's billing line; blocks left empty go.
  const systemBlocks = (
    typeof body.system === "string" ? [{ type: "text", text: body.system }] : objects(body.system)
  )
    .filter((b) => b.type === "text" && typeof b.text === "string")
    .map((b) => ({ type: "text", text: String(b.text).replace(BILLING_LINE, "").trim() }))
    .filter((b) => b.text !== "");
  if (systemBlocks.length > 0) out.push({ role: "system", content: partsContent(systemBlocks) });
  body.messages.forEach((m, i) => {
    const field = `messages[${i}]`;
    if (!isObject(m)) throw badField(field, "must be an object");
    if (m.role === "system") {
      // Claude Code (2.1.x) sends system messages inside `messages` (e.g. its list of sub-agents
      // after the first user turn); they stay where they are, as a system turn of the chat form.
      if (typeof m.content !== "string" && !Array.isArray(m.content))
        throw badField(`${field}.content`, "required");
      out.push({ role: "system", content: textOfBlocks(m.content) });
      return;
    }
    if (m.role !== "user" && m.role !== "assistant")
      throw badField(`${field}.role`, "must be 'user', 'assistant' or 'system'");
    const blocks: JsonObject[] =
      typeof m.content === "string"
        ? [{ type: "text", text: m.content }]
        : Array.isArray(m.content)
          ? objects(m.content)
          : [];
    if (typeof m.content !== "string" && !Array.isArray(m.content))
      throw badField(`${field}.content`, "required");
    if (m.role === "assistant") {
      const reasoning = blocks
        .filter((b) => b.type === "thinking")
        .map((b) =>
          typeof b.thinking === "string" && b.thinking ? b.thinking : (decodeReasoning(b.signature) ?? ""),
        )
        .join("");
      const calls = blocks
        .filter((b) => b.type === "tool_use")
        .map((b) => ({
          id: asText(b.id, randomId("toolu_")),
          type: "function",
          function: { name: asText(b.name), arguments: JSON.stringify(b.input ?? {}) },
        }));
      const text = blocks
        .filter((b) => b.type === "text")
        .map((b) => asText(b.text))
        .join("");
      out.push({
        role: "assistant",
        content: text.length > 0 || calls.length === 0 ? text : null,
        ...(reasoning ? { reasoning_content: reasoning } : {}),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
      return;
    }
    // Tool results first (they answer the previous assistant turn), then the rest of the user turn.
    blocks.forEach((b, j) => {
      if (b.type !== "tool_result") return;
      if (typeof b.tool_use_id !== "string")
        throw badField(`${field}.content[${j}].tool_use_id`, "required string");
      const content = textOfBlocks(b.content);
      out.push({
        role: "tool",
        tool_call_id: b.tool_use_id,
        content: b.is_error === true ? prefixed("Error: ", content) : content,
      });
    });
    const parts = contentParts(
      blocks.filter((b) => b.type !== "tool_result"),
      `${field}.content`,
    );
    if (parts.length > 0) out.push({ role: "user", content: partsContent(parts) });
  });
  return out;
}

function convertToolChoice(choice: unknown): { tool_choice?: unknown; parallel_tool_calls?: boolean } {
  if (!isObject(choice)) return {};
  const parallel = choice.disable_parallel_tool_use === true ? { parallel_tool_calls: false } : {};
  switch (choice.type) {
    case "auto":
      return { tool_choice: "auto", ...parallel };
    case "any":
      return { tool_choice: "required", ...parallel };
    case "none":
      return { tool_choice: "none" };
    case "tool":
      if (typeof choice.name !== "string") throw badField("tool_choice.name", "required string");
      return { tool_choice: { type: "function", function: { name: choice.name } }, ...parallel };
    default:
      throw badField("tool_choice.type", "must be auto, any, tool or none");
  }
}

/**
 * Anthropic Messages → internal chat request (also used by `count_tokens`).
 *
 * @example
 * ```ts
 * anthropicToChat({ model: "claude", max_tokens: 100, messages: [{ role: "user", content: "hi" }] });
 * ```
 */
export function anthropicToChat(body: unknown): JsonObject {
  refuseTooDeep(body);
  if (!isObject(body)) throw badField("(body)", "must be a JSON object");
  const chat: JsonObject = { messages: convertMessages(body) };
  if (typeof body.model === "string") chat.model = body.model;
  if (body.max_tokens !== undefined) chat.max_tokens = body.max_tokens;
  for (const key of ["temperature", "top_p", "top_k"] as const)
    if (body[key] !== undefined) chat[key] = body[key];
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) chat.stop = body.stop_sequences;
  const tools = objects(body.tools).filter((t) => t.type === undefined || t.type === "custom");
  if (tools.length > 0) {
    chat.tools = tools.map((t) => ({
      type: "function",
      function: {
        name: t.name,
        ...(typeof t.description === "string" ? { description: t.description } : {}),
        parameters: isObject(t.input_schema) ? t.input_schema : { type: "object", properties: {} },
      },
    }));
  }
  Object.assign(chat, convertToolChoice(body.tool_choice));
  if (isObject(body.thinking)) {
    // The Anthropic switch maps onto the chat template's thinking switch (Qwen3 `enable_thinking`):
    // `enabled` and `adaptive` (the model decides how much to think; Claude Code 2.1's default)
    // turn it on, `disabled` off.
    chat.chat_template_kwargs = { enable_thinking: body.thinking.type !== "disabled" };
  }
  return chat;
}

function stopReason(
  completion: JsonObject,
  calls: FlatToolCall[],
): { stop_reason: string; stop_sequence: string | null } {
  const choice = choiceOf(completion);
  if (calls.length > 0 || choice.finish_reason === "tool_calls")
    return { stop_reason: "tool_use", stop_sequence: null };
  if (choice.finish_reason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (typeof choice.matched_stop === "string")
    return { stop_reason: "stop_sequence", stop_sequence: choice.matched_stop };
  return { stop_reason: "end_turn", stop_sequence: null };
}

function usageBlock(completion: JsonObject): JsonObject {
  const u = usageOf(completion);
  return {
    input_tokens: u.prompt - u.cached,
    output_tokens: u.completion,
    cache_read_input_tokens: u.cached,
    cache_creation_input_tokens: 0,
  };
}

/**
 * The Anthropic Messages family.
 *
 * @example
 * ```ts
 * const req = anthropic.parse(body, ctx); // req.chat is an OpenAI chat request
 * ```
 */
export const anthropic: Family = {
  api: "anthropic",
  parse(body): ParsedRequest {
    const chat = anthropicToChat(body);
    const b = body as JsonObject;
    if (b.max_tokens === undefined) throw badField("max_tokens", "required");
    return {
      chat,
      stream: b.stream === true,
      requestedModel: typeof b.model === "string" ? b.model : null,
      reply: {},
    };
  },
  respond(completion, req) {
    const message = messageOf(completion);
    const calls = toolCallsOf(message);
    const content: JsonObject[] = [];
    if (typeof message.reasoning_content === "string" && message.reasoning_content) {
      content.push({
        type: "thinking",
        thinking: message.reasoning_content,
        signature: encodeReasoning(message.reasoning_content),
      });
    }
    if (typeof message.content === "string" && message.content)
      content.push({ type: "text", text: message.content });
    for (const c of calls)
      content.push({ type: "tool_use", id: c.id, name: c.name, input: parseArguments(c.arguments) });
    return {
      id: `msg_${String(completion.id ?? randomId(""))}`,
      type: "message",
      role: "assistant",
      model: req.requestedModel ?? completion.model ?? null,
      content,
      ...stopReason(completion, calls),
      usage: usageBlock(completion),
    };
  },
  stream: anthropicStream,
  errorBody: (e: ErrorInfo) => ({
    type: "error",
    error: {
      type: ERROR_TYPES[e.status] ?? (e.status >= 500 ? "api_error" : "invalid_request_error"),
      message: e.message,
      code: e.code,
    },
  }),
};

/** message_start, then per block content_block_start/delta…/stop, then message_delta and message_stop. */
function anthropicStream(req: ParsedRequest, meta: { id: string; created: number }): StreamWriter {
  let index = -1;
  let open: "thinking" | "text" | "tool_use" | null = null;
  let reasoning = "";
  const close = (): string => {
    if (open === null) return "";
    let out = "";
    if (open === "thinking") {
      out += sse(
        {
          type: "content_block_delta",
          index,
          delta: { type: "signature_delta", signature: encodeReasoning(reasoning) },
        },
        "content_block_delta",
      );
    }
    open = null;
    return out + sse({ type: "content_block_stop", index }, "content_block_stop");
  };
  const openBlock = (type: "thinking" | "text" | "tool_use", block: JsonObject): string => {
    const out = close();
    index++;
    open = type;
    return out + sse({ type: "content_block_start", index, content_block: block }, "content_block_start");
  };
  return {
    contentType: "text/event-stream",
    start: () =>
      sse(
        {
          type: "message_start",
          message: {
            id: `msg_${meta.id}`,
            type: "message",
            role: "assistant",
            model: req.requestedModel,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { input_tokens: 0, output_tokens: 0 },
          },
        },
        "message_start",
      ),
    delta(ev: DeltaEvent) {
      let out = "";
      if (ev.kind === "reasoning") {
        if (open !== "thinking")
          out += openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
        reasoning += ev.text;
        return (
          out +
          sse(
            { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: ev.text } },
            "content_block_delta",
          )
        );
      }
      if (ev.kind === "text") {
        if (open !== "text") out += openBlock("text", { type: "text", text: "" });
        return (
          out +
          sse(
            { type: "content_block_delta", index, delta: { type: "text_delta", text: ev.text } },
            "content_block_delta",
          )
        );
      }
      out += openBlock("tool_use", { type: "tool_use", id: ev.id, name: ev.name, input: {} });
      return (
        out +
        sse(
          {
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: JSON.stringify(parseArguments(ev.arguments)) },
          },
          "content_block_delta",
        )
      );
    },
    finish(completion) {
      const calls = toolCallsOf(messageOf(completion));
      return (
        close() +
        sse(
          { type: "message_delta", delta: stopReason(completion, calls), usage: usageBlock(completion) },
          "message_delta",
        ) +
        sse({ type: "message_stop" }, "message_stop")
      );
    },
    error: (e) => sse(anthropic.errorBody(e), "error"),
  };
}
