/**
 * What an Anthropic Messages answer is made of: the `message` object, its stop reason and usage
 * (shared by the whole reply and the stream's `message_delta`), and the error body.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { encodeReasoning, parseArguments, randomId } from "../json";
import { choiceOf, type FlatToolCall, messageOf, toolCallsOf, usageOf } from "./common";
import type { ErrorInfo, ParsedRequest } from "./types";

/** Anthropic's error `type` for each HTTP status it documents. */
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

/**
 * Why the answer stopped, in Anthropic's words: a tool call, the token limit, a stop sequence, or
 * the end of the turn.
 *
 * @example
 * ```ts
 * stopReason(completion, []); // { stop_reason: "end_turn", stop_sequence: null }
 * ```
 */
export function stopReason(
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

/**
 * The `usage` block: cached prompt tokens count as cache reads, never as input.
 *
 * @example
 * ```ts
 * usageBlock(completion); // { input_tokens: 9, output_tokens: 4, cache_read_input_tokens: 3, cache_creation_input_tokens: 0 }
 * ```
 */
export function usageBlock(completion: JsonObject): JsonObject {
  const u = usageOf(completion);
  return {
    input_tokens: u.prompt - u.cached,
    output_tokens: u.completion,
    cache_read_input_tokens: u.cached,
    cache_creation_input_tokens: 0,
  };
}

/**
 * The `message` of a whole (not streamed) answer: thinking, text and tool_use blocks.
 *
 * @example
 * ```ts
 * anthropicMessage(completion, req); // { id: "msg_…", type: "message", role: "assistant", content: [...], ... }
 * ```
 */
export function anthropicMessage(completion: JsonObject, req: ParsedRequest): JsonObject {
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
}

/**
 * Anthropic's error body; the error type follows the HTTP status.
 *
 * @example
 * ```ts
 * anthropicErrorBody({ status: 429, type: "x", code: "c", message: "m", param: null });
 * // { type: "error", error: { type: "rate_limit_error", message: "m", code: "c" } }
 * ```
 */
export function anthropicErrorBody(e: ErrorInfo): JsonObject {
  return {
    type: "error",
    error: {
      type: ERROR_TYPES[e.status] ?? (e.status >= 500 ? "api_error" : "invalid_request_error"),
      message: e.message,
      code: e.code,
    },
  };
}
