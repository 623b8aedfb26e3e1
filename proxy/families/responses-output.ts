/**
 * What an OpenAI Responses answer is made of: its output items (reasoning, message, function or
 * custom tool call) and the `response` object that holds them, shared by the whole reply and the
 * stream's opening and closing events.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { encodeReasoning, isObject, parseArguments, randomId } from "../json";
import { choiceOf, type FlatToolCall, messageOf, toolCallsOf, usageOf } from "./common";
import type { ParsedRequest } from "./types";

/**
 * The free-form (`custom`) tools the request declared: their calls are answered as
 * `custom_tool_call` items.
 *
 * @example
 * ```ts
 * customToolsOf(req).has("apply_patch"); // true when the harness declared it `{type: "custom"}`
 * ```
 */
export function customToolsOf(req: ParsedRequest): Set<string> {
  return new Set(Array.isArray(req.reply.customTools) ? (req.reply.customTools as string[]) : []);
}

/**
 * A reasoning output item as OpenAI's own API returns one: the text in `summary`, the opaque
 * `encrypted_content` when asked for, and no `content`. A `content: [{type: "reasoning_text"}]`
 * copy is what Copilot CLI reads as a second, visible answer: it echoed it back as an assistant
 * message repeating the reasoning, so the model saw it twice and every turn was
 * `history_rewritten`. Codex sends the item back as it got it, with or without `content`.
 *
 * @example
 * ```ts
 * reasoningItem("rs_1", "Let me look.", true); // { type: "reasoning", id: "rs_1", summary: [...], encrypted_content }
 * ```
 */
export function reasoningItem(id: string, text: string, encrypted: boolean): JsonObject {
  return {
    type: "reasoning",
    id,
    summary: [{ type: "summary_text", text }],
    ...(encrypted ? { encrypted_content: encodeReasoning(text) } : {}),
  };
}

/**
 * A completed assistant message item holding one `output_text` part.
 *
 * @example
 * ```ts
 * messageItem("msg_1", "Done."); // { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [...] }
 * ```
 */
export function messageItem(id: string, text: string): JsonObject {
  return {
    type: "message",
    id,
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
  };
}

/**
 * A tool call item: a `custom_tool_call` carrying its `input` for a free-form tool the request
 * declared, else a `function_call` carrying its JSON `arguments`.
 *
 * @example
 * ```ts
 * callItem("fc_1", { id: "call_1", name: "bash", arguments: '{"cmd":"ls"}' }, false); // a function_call item
 * ```
 */
export function callItem(id: string, call: FlatToolCall, custom: boolean): JsonObject {
  return custom
    ? {
        type: "custom_tool_call",
        id,
        call_id: call.id,
        name: call.name,
        input: String(parseArguments(call.arguments).input ?? ""),
        status: "completed",
      }
    : {
        type: "function_call",
        id,
        call_id: call.id,
        name: call.name,
        arguments: call.arguments,
        status: "completed",
      };
}

/**
 * The `response` object of a completion. `ids` names the output items (a stream announced them
 * already, so the final object must name them the same); without it each item gets a fresh id.
 *
 * @example
 * ```ts
 * responseObject(completion, req, "abc", "completed"); // { id: "resp_abc", object: "response", output: [...], ... }
 * ```
 */
export function responseObject(
  completion: JsonObject,
  req: ParsedRequest,
  id: string,
  status: string,
  ids?: string[],
): JsonObject {
  const message = messageOf(completion);
  const custom = customToolsOf(req);
  const output: JsonObject[] = [];
  let n = 0;
  const nextId = (prefix: string) => ids?.[n++] ?? randomId(prefix);
  if (typeof message.reasoning_content === "string" && message.reasoning_content) {
    output.push(reasoningItem(nextId("rs_"), message.reasoning_content, req.reply.encrypted === true));
  }
  if (typeof message.content === "string" && message.content)
    output.push(messageItem(nextId("msg_"), message.content));
  for (const c of toolCallsOf(message)) output.push(callItem(nextId("fc_"), c, custom.has(c.name)));
  const u = usageOf(completion);
  const truncated = choiceOf(completion).finish_reason === "length";
  const echo = isObject(req.reply.echo) ? req.reply.echo : {};
  return {
    id: `resp_${id}`,
    object: "response",
    created_at: typeof completion.created === "number" ? completion.created : Math.floor(Date.now() / 1000),
    status: status === "completed" && truncated ? "incomplete" : status,
    error: null,
    incomplete_details: status === "completed" && truncated ? { reason: "max_output_tokens" } : null,
    model: req.requestedModel ?? completion.model ?? null,
    output,
    usage: {
      input_tokens: u.prompt,
      // The SDKs type both details as required (openai-python 3.x: `cache_write_tokens`); the engine
      // radix cache fills as a side effect, so no input token is ever counted as a cache write.
      input_tokens_details: { cached_tokens: u.cached, cache_write_tokens: 0 },
      output_tokens: u.completion,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: u.prompt + u.completion,
    },
    ...echo,
  };
}
