/**
 * The OpenAI Responses stream: `response.created` / `response.in_progress`, then per output item
 * `output_item.added`, its part/text/arguments deltas and `…done` events, `output_item.done`, and
 * `response.completed` (or `response.incomplete`). Every event carries a `sequence_number`.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { randomId } from "../json";
import { type FlatToolCall, sse } from "./common";
import { DeltaWriter } from "./delta-writer";
import { callItem, customToolsOf, messageItem, reasoningItem, responseObject } from "./responses-output";
import type { ErrorInfo, ParsedRequest } from "./types";

/** The reasoning or message item the text deltas are going to, until another kind of delta. */
interface OpenItem {
  kind: "reasoning" | "text";
  id: string;
  text: string;
}

/**
 * Writes one answer as Responses events, item by item.
 *
 * @example
 * ```ts
 * const w = new ResponsesStream(req, { id: "abc", created: 0 });
 * w.start() + w.delta({ kind: "text", text: "hi" }) + w.finish(completion);
 * ```
 */
export class ResponsesStream extends DeltaWriter {
  readonly contentType = "text/event-stream";
  private seq = 0;
  private index = -1;
  /** The ids of the output items as announced: the closing `response` names them the same. */
  private readonly ids: string[] = [];
  private open: OpenItem | null = null;
  private readonly custom: Set<string>;

  constructor(
    private readonly req: ParsedRequest,
    private readonly meta: { id: string; created: number },
  ) {
    super();
    this.custom = customToolsOf(req);
  }

  start(): string {
    return (
      this.ev("response.created", { response: this.shell("in_progress") }) +
      this.ev("response.in_progress", { response: this.shell("in_progress") })
    );
  }

  protected onReasoningDelta(text: string): string {
    return this.itemDelta("reasoning", text, "response.reasoning_summary_text.delta", {
      summary_index: 0,
      delta: text,
    });
  }

  protected onTextDelta(text: string): string {
    return this.itemDelta("text", text, "response.output_text.delta", {
      content_index: 0,
      delta: text,
      logprobs: [],
    });
  }

  protected onToolCall(call: FlatToolCall): string {
    let out = this.close();
    this.index++;
    const id = randomId("fc_");
    this.ids.push(id);
    const custom = this.custom.has(call.name);
    const item = callItem(id, call, custom);
    out += this.ev("response.output_item.added", {
      output_index: this.index,
      item: { ...item, status: "in_progress", ...(custom ? { input: "" } : { arguments: "" }) },
    });
    const at = { item_id: id, output_index: this.index };
    if (custom) {
      const input = String(item.input);
      out += this.ev("response.custom_tool_call_input.delta", { ...at, delta: input });
      out += this.ev("response.custom_tool_call_input.done", { ...at, input });
    } else {
      out += this.ev("response.function_call_arguments.delta", { ...at, delta: call.arguments });
      out += this.ev("response.function_call_arguments.done", { ...at, arguments: call.arguments });
    }
    return out + this.ev("response.output_item.done", { output_index: this.index, item });
  }

  finish(completion: JsonObject): string {
    const out = this.close();
    const response = responseObject(completion, this.req, this.meta.id, "completed", this.ids);
    const type = response.status === "incomplete" ? "response.incomplete" : "response.completed";
    return out + this.ev(type, { response });
  }

  error(e: ErrorInfo): string {
    return this.ev("error", { code: e.code, message: e.message, param: e.param });
  }

  /** A piece of reasoning or text: into the open item of its kind, opening one when needed. */
  private itemDelta(kind: OpenItem["kind"], text: string, type: string, fields: JsonObject): string {
    const out = this.open?.kind === kind ? "" : this.close() + this.openItem(kind);
    const item = this.open as OpenItem;
    item.text += text;
    return out + this.ev(type, { item_id: item.id, output_index: this.index, ...fields });
  }

  /** One event, numbered in the order it is written. */
  private ev(type: string, data: JsonObject): string {
    return sse({ type, sequence_number: this.seq++, ...data }, type);
  }

  /** The `response` of the opening events: no output and no usage yet. */
  private shell(status: string): JsonObject {
    const { id, created } = this.meta;
    return { ...responseObject({ id, created, choices: [] }, this.req, id, status), output: [], usage: null };
  }

  /** Starts a reasoning or message item: its `output_item.added` and its first (empty) part. */
  private openItem(kind: OpenItem["kind"]): string {
    this.index++;
    const id = randomId(kind === "text" ? "msg_" : "rs_");
    this.ids.push(id);
    this.open = { kind, id, text: "" };
    const at = { item_id: id, output_index: this.index };
    if (kind === "text") {
      return (
        this.ev("response.output_item.added", {
          output_index: this.index,
          item: { type: "message", id, status: "in_progress", role: "assistant", content: [] },
        }) +
        this.ev("response.content_part.added", {
          ...at,
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [], logprobs: [] },
        })
      );
    }
    return (
      this.ev("response.output_item.added", {
        output_index: this.index,
        item: { type: "reasoning", id, summary: [] },
      }) +
      this.ev("response.reasoning_summary_part.added", {
        ...at,
        summary_index: 0,
        part: { type: "summary_text", text: "" },
      })
    );
  }

  /** Ends the open reasoning or message item with its `…done` events; "" when none is open. */
  private close(): string {
    const item = this.open;
    if (!item) return "";
    this.open = null;
    const at = { item_id: item.id, output_index: this.index };
    if (item.kind === "text") {
      const part = { type: "output_text", text: item.text, annotations: [], logprobs: [] };
      return (
        this.ev("response.output_text.done", { ...at, content_index: 0, text: item.text, logprobs: [] }) +
        this.ev("response.content_part.done", { ...at, content_index: 0, part }) +
        this.ev("response.output_item.done", {
          output_index: this.index,
          item: messageItem(item.id, item.text),
        })
      );
    }
    const encrypted = this.req.reply.encrypted === true;
    return (
      this.ev("response.reasoning_summary_text.done", { ...at, summary_index: 0, text: item.text }) +
      this.ev("response.reasoning_summary_part.done", {
        ...at,
        summary_index: 0,
        part: { type: "summary_text", text: item.text },
      }) +
      this.ev("response.output_item.done", {
        output_index: this.index,
        item: reasoningItem(item.id, item.text, encrypted),
      })
    );
  }
}
