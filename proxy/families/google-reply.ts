/**
 * What a Gemini answer is made of: the candidate's parts, finish reason and usage metadata
 * (shared by the whole reply and the stream's closing chunk), and the error body.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { encodeReasoning, parseArguments, randomId } from "../json";
import { choiceOf, messageOf, toolCallsOf, usageOf } from "./common";
import type { ErrorInfo, ParsedRequest } from "./types";

/** Google's status name for each HTTP status the proxy answers. */
const STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

/**
 * The candidate's `finishReason`: `MAX_TOKENS` when the token limit cut the answer, else `STOP`.
 *
 * @example
 * ```ts
 * finishReason(completion); // "STOP"
 * ```
 */
export function finishReason(completion: JsonObject): string {
  return choiceOf(completion).finish_reason === "length" ? "MAX_TOKENS" : "STOP";
}

/**
 * The `usageMetadata` of an answer.
 *
 * @example
 * ```ts
 * usageMetadata(completion); // { promptTokenCount: 12, candidatesTokenCount: 5, totalTokenCount: 17, cachedContentTokenCount: 0 }
 * ```
 */
export function usageMetadata(completion: JsonObject): JsonObject {
  const u = usageOf(completion);
  return {
    promptTokenCount: u.prompt,
    candidatesTokenCount: u.completion,
    totalTokenCount: u.prompt + u.completion,
    cachedContentTokenCount: u.cached,
  };
}

function answerParts(completion: JsonObject, includeThoughts: boolean): JsonObject[] {
  const message = messageOf(completion);
  const parts: JsonObject[] = [];
  const reasoning = typeof message.reasoning_content === "string" ? message.reasoning_content : "";
  if (reasoning && includeThoughts) parts.push({ text: reasoning, thought: true });
  if (typeof message.content === "string" && message.content) parts.push({ text: message.content });
  for (const c of toolCallsOf(message))
    parts.push({ functionCall: { id: c.id, name: c.name, args: parseArguments(c.arguments) } });
  // Thinking models return a signature the client must send back; ours carries the reasoning itself.
  if (reasoning && parts.length > 0)
    parts[parts.length - 1] = { ...parts.at(-1), thoughtSignature: encodeReasoning(reasoning) };
  return parts;
}

/**
 * The `generateContent` answer of a whole (not streamed) completion: one candidate.
 *
 * @example
 * ```ts
 * geminiResponse(completion, req); // { candidates: [{ content: { role: "model", parts }, ... }], usageMetadata, ... }
 * ```
 */
export function geminiResponse(completion: JsonObject, req: ParsedRequest): JsonObject {
  return {
    candidates: [
      {
        content: { role: "model", parts: answerParts(completion, req.reply.includeThoughts === true) },
        finishReason: finishReason(completion),
        index: 0,
      },
    ],
    usageMetadata: usageMetadata(completion),
    modelVersion: req.requestedModel ?? completion.model ?? null,
    responseId: String(completion.id ?? randomId("")),
  };
}

/**
 * Google's error body: the HTTP status, its status name, and the proxy's code as the reason.
 *
 * @example
 * ```ts
 * googleErrorBody({ status: 504, type: "timeout_error", code: "engine_timeout", message: "m", param: null });
 * // { error: { code: 504, message: "m", status: "DEADLINE_EXCEEDED", details: [{ reason: "engine_timeout" }] } }
 * ```
 */
export function googleErrorBody(e: ErrorInfo): JsonObject {
  return {
    error: {
      code: e.status,
      message: e.message,
      status: STATUS_NAMES[e.status] ?? (e.status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"),
      details: [{ reason: e.code }],
    },
  };
}
