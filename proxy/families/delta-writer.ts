/**
 * The shape every family's stream writer shares: one method per kind of delta, so a writer reads
 * as the events it answers (`onReasoningDelta`, `onTextDelta`, `onToolCall`) and never as one
 * branching `delta`.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import type { FlatToolCall } from "./common";
import type { DeltaEvent, ErrorInfo, StreamWriter } from "./types";

/**
 * A {@link StreamWriter} whose `delta` dispatches on the delta's kind.
 *
 * @example
 * ```ts
 * class Plain extends DeltaWriter {
 *   readonly contentType = "text/plain";
 *   start = () => "";
 *   protected onReasoningDelta = () => "";
 *   protected onTextDelta = (text: string) => text;
 *   protected onToolCall = () => "";
 *   finish = () => "\n";
 *   error = (e: ErrorInfo) => e.message;
 * }
 * ```
 */
export abstract class DeltaWriter implements StreamWriter {
  abstract readonly contentType: string;
  abstract start(): string;
  abstract finish(completion: JsonObject): string;
  abstract error(err: ErrorInfo): string;
  /** A piece of the reasoning. */
  protected abstract onReasoningDelta(text: string): string;
  /** A piece of the answer's text, with its logprobs when the harness asked for them. */
  protected abstract onTextDelta(text: string, logprobs?: unknown): string;
  /** One whole tool call (calls are sent once complete, never in pieces). */
  protected abstract onToolCall(call: FlatToolCall): string;

  delta(ev: DeltaEvent): string {
    if (ev.kind === "reasoning") return this.onReasoningDelta(ev.text);
    if (ev.kind === "text") return this.onTextDelta(ev.text, ev.logprobs);
    return this.onToolCall(ev);
  }
}
