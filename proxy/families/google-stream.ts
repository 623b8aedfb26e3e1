/**
 * The Gemini stream: one chunk per delta, as `data: {candidates…}` SSE frames with `alt=sse`,
 * else as the elements of one JSON array written piece by piece.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { encodeReasoning, parseArguments } from "../json";
import { type FlatToolCall, sse } from "./common";
import { DeltaWriter } from "./delta-writer";
import { finishReason, googleErrorBody, usageMetadata } from "./google-reply";
import type { ErrorInfo, ParsedRequest } from "./types";

/**
 * Writes one answer as Gemini chunks.
 *
 * @example
 * ```ts
 * const w = new GoogleStream(req, { id: "abc", created: 0 });
 * w.start() + w.delta({ kind: "text", text: "hi" }) + w.finish(completion);
 * ```
 */
export class GoogleStream extends DeltaWriter {
  readonly contentType: string;
  private readonly asSse: boolean;
  /** No element written yet: the JSON array is still to be opened. */
  private first = true;
  private reasoning = "";
  /** The reasoning's signature went out already (on the first call). */
  private signed = false;

  constructor(
    private readonly req: ParsedRequest,
    private readonly meta: { id: string; created: number },
  ) {
    super();
    this.asSse = req.reply.sse === true;
    this.contentType = this.asSse ? "text/event-stream" : "application/json";
  }

  start(): string {
    return "";
  }

  protected onReasoningDelta(text: string): string {
    this.reasoning += text;
    return this.req.reply.includeThoughts === true ? this.chunk([{ text, thought: true }]) : "";
  }

  protected onTextDelta(text: string): string {
    return this.chunk([{ text }]);
  }

  protected onToolCall(call: FlatToolCall): string {
    const part: JsonObject = {
      functionCall: { id: call.id, name: call.name, args: parseArguments(call.arguments) },
    };
    // As Gemini does: the signature rides on the first call (clients keep call parts, not empty ones).
    if (this.reasoning && !this.signed) part.thoughtSignature = encodeReasoning(this.reasoning);
    this.signed ||= this.reasoning !== "";
    return this.chunk([part]);
  }

  finish(completion: JsonObject): string {
    // Never an empty `parts`: google-genai's chats count a chunk without parts as an invalid turn
    // and drop it (and its question) from the history.
    const unsigned = this.reasoning && !this.signed;
    const parts: JsonObject[] = [
      { text: "", ...(unsigned ? { thoughtSignature: encodeReasoning(this.reasoning) } : {}) },
    ];
    const body = this.frame({
      candidates: [{ content: { role: "model", parts }, finishReason: finishReason(completion), index: 0 }],
      usageMetadata: usageMetadata(completion),
      modelVersion: this.req.requestedModel,
      responseId: this.meta.id,
    });
    return this.asSse ? body : `${body}]`;
  }

  error(e: ErrorInfo): string {
    const body = googleErrorBody(e);
    return this.asSse ? sse(body) : `${this.first ? "[" : ","}${JSON.stringify(body)}]`;
  }

  /** One chunk of the answer with these parts. */
  private chunk(parts: JsonObject[]): string {
    return this.frame({
      candidates: [{ content: { role: "model", parts }, index: 0 }],
      modelVersion: this.req.requestedModel,
      responseId: this.meta.id,
    });
  }

  /** An SSE frame, or the next element of the JSON array (opening it first). */
  private frame(body: JsonObject): string {
    if (this.asSse) return sse(body);
    const prefix = this.first ? "[" : ",\r\n";
    this.first = false;
    return prefix + JSON.stringify(body);
  }
}
