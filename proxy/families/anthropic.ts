/**
 * Anthropic Messages (`POST /v1/messages`): system blocks, text/image/document/tool_use/
 * tool_result/thinking blocks, tools with `input_schema`, `tool_choice` (auto/any/tool/none), the
 * `thinking` switch, `stop_sequences`; replies as a `message` with thinking/text/tool_use blocks
 * and Anthropic's ordered SSE events.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { badField, decodeReasoning, isObject, objects, randomId } from "../json";
import { anthropicErrorBody, anthropicMessage } from "./anthropic-reply";
import { AnthropicStream } from "./anthropic-stream";
import { asText, functionTool, partsContent, refuseTooDeep } from "./common";
import type { Family, ParsedRequest } from "./types";

/** Claude Code puts a billing line in the system prompt; it means nothing to another model. */
const BILLING_LINE = /^x-anthropic-billing-header:.*$/gm;

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
    chat.tools = tools.map((t) =>
      functionTool(t, isObject(t.input_schema) ? t.input_schema : { type: "object", properties: {} }),
    );
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
  respond: anthropicMessage,
  stream: (req, meta) => new AnthropicStream(req, meta),
  errorBody: anthropicErrorBody,
};
