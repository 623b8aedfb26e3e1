/**
 * The Anthropic Messages stream: `message_start`, then per content block `content_block_start`,
 * its deltas and `content_block_stop`, then `message_delta` and `message_stop`.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { encodeReasoning, parseArguments } from "../json";
import { anthropicErrorBody, stopReason, usageBlock } from "./anthropic-reply";
import { type FlatToolCall, messageOf, sse, toolCallsOf } from "./common";
import { DeltaWriter } from "./delta-writer";
import type { ErrorInfo, ParsedRequest } from "./types";

type BlockType = "thinking" | "text" | "tool_use";

/**
 * Writes one answer as Anthropic's ordered events, one content block per run of deltas.
 *
 * @example
 * ```ts
 * const w = new AnthropicStream(req, { id: "abc", created: 0 });
 * w.start() + w.delta({ kind: "text", text: "hi" }) + w.finish(completion);
 * ```
 */
export class AnthropicStream extends DeltaWriter {
  readonly contentType = "text/event-stream";
  private index = -1;
  private open: BlockType | null = null;
  /** The reasoning so far: the thinking block closes with it as its signature. */
  private reasoning = "";

  constructor(
    private readonly req: ParsedRequest,
    private readonly meta: { id: string; created: number },
  ) {
    super();
  }

  start(): string {
    const message = {
      id: `msg_${this.meta.id}`,
      type: "message",
      role: "assistant",
      model: this.req.requestedModel,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return sse({ type: "message_start", message }, "message_start");
  }

  protected onReasoningDelta(text: string): string {
    const out =
      this.open === "thinking"
        ? ""
        : this.openBlock("thinking", { type: "thinking", thinking: "", signature: "" });
    this.reasoning += text;
    return out + this.blockDelta({ type: "thinking_delta", thinking: text });
  }

  protected onTextDelta(text: string): string {
    const out = this.open === "text" ? "" : this.openBlock("text", { type: "text", text: "" });
    return out + this.blockDelta({ type: "text_delta", text });
  }

  protected onToolCall(call: FlatToolCall): string {
    return (
      this.openBlock("tool_use", { type: "tool_use", id: call.id, name: call.name, input: {} }) +
      this.blockDelta({
        type: "input_json_delta",
        partial_json: JSON.stringify(parseArguments(call.arguments)),
      })
    );
  }

  finish(completion: JsonObject): string {
    const calls = toolCallsOf(messageOf(completion));
    return (
      this.close() +
      sse(
        { type: "message_delta", delta: stopReason(completion, calls), usage: usageBlock(completion) },
        "message_delta",
      ) +
      sse({ type: "message_stop" }, "message_stop")
    );
  }

  error(e: ErrorInfo): string {
    return sse(anthropicErrorBody(e), "error");
  }

  private blockDelta(delta: JsonObject): string {
    return sse({ type: "content_block_delta", index: this.index, delta }, "content_block_delta");
  }

  /** Closes the open block and starts the next. */
  private openBlock(type: BlockType, block: JsonObject): string {
    const out = this.close();
    this.index++;
    this.open = type;
    return (
      out +
      sse({ type: "content_block_start", index: this.index, content_block: block }, "content_block_start")
    );
  }

  /** Ends the open block; a thinking block first gets its signature (the reasoning, encoded). */
  private close(): string {
    if (this.open === null) return "";
    const signature =
      this.open === "thinking"
        ? this.blockDelta({ type: "signature_delta", signature: encodeReasoning(this.reasoning) })
        : "";
    this.open = null;
    return signature + sse({ type: "content_block_stop", index: this.index }, "content_block_stop");
  }
}
