/**
 * The contract every API family implements: native request → internal chat form, internal
 * completion → native response, a native SSE writer, and the native error body.
 *
 * The internal form is OpenAI Chat Completions (what SGLang and vLLM serve): a request body with
 * `messages`/`tools`/`tool_choice`/…, and a completion with `choices[0].message` carrying
 * `content`, `reasoning_content` and `tool_calls`.
 *
 * @module
 */
import type { IncomingHttpHeaders } from "node:http";
import type { JsonObject } from "../../protocol";

/** The four API families, named as on the completion record. */
export type ApiType = "openai_chat" | "openai_responses" | "anthropic" | "google";

/** Where a request came from: its path, query and headers. */
export interface RequestContext {
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
}

/** A harness request turned into the internal chat form. */
export interface ParsedRequest {
  /** OpenAI Chat Completions request body. */
  chat: JsonObject;
  /** Did the harness ask for a stream? */
  stream: boolean;
  /** The model name the harness asked for; the reply carries it back. */
  requestedModel: string | null;
  /** Family-specific reply options (e.g. Google's SSE vs JSON array, Responses' include list). */
  reply: JsonObject;
}

/** One piece of an answer, in the order it is shown to the harness. */
export type DeltaEvent =
  | { kind: "reasoning"; text: string }
  | { kind: "text"; text: string; logprobs?: unknown }
  | { kind: "tool_call"; id: string; name: string; arguments: string };

/** An error already classified: HTTP status, OpenAI-style type/code, message, offending field. */
export interface ErrorInfo {
  status: number;
  type: string;
  code: string;
  message: string;
  param: string | null;
}

/** Writes one answer as the family's SSE (or chunked JSON) stream, frame by frame. */
export interface StreamWriter {
  contentType: string;
  /** Frames before the first delta. */
  start(): string;
  /** Frames of one delta. */
  delta(ev: DeltaEvent): string;
  /** Closing frames, given the complete (internal) completion. */
  finish(completion: JsonObject): string;
  /** An error after the stream has started. */
  error(err: ErrorInfo): string;
}

/** One API family. */
export interface Family {
  api: ApiType;
  /** Native request → internal form; throws a 400 naming the field for bad input. */
  parse(body: unknown, ctx: RequestContext): ParsedRequest;
  /** Internal completion → native response body. */
  respond(completion: JsonObject, req: ParsedRequest): JsonObject;
  /** A writer for a streamed answer; `meta` gives the answer's id and creation time. */
  stream(req: ParsedRequest, meta: { id: string; created: number }): StreamWriter;
  /** The family's native error body. */
  errorBody(err: ErrorInfo): JsonObject;
}
