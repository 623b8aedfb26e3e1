/**
 * Pieces shared by the families: system/developer merging, the deltas of a complete answer, and
 * the SSE frame format.
 *
 * @module
 */
import { type JsonObject, tooDeep, tooDeepMessage } from "../../protocol";
import { badField, isObject, objects } from "../json";
import type { DeltaEvent } from "./types";

/**
 * Refuses a request nested deeper than `LIMITS.maxJsonDepth` with a 400 naming where: every family
 * calls it first, since converting, recording (JSON.stringify) or sending such a body would
 * overflow the stack and answer a 500 — or, once the answer was sent, fail as it is recorded.
 *
 * @example
 * ```ts
 * refuseTooDeep(body); // throws badField("metadata.a.a…", "nests more than 128 levels deep …")
 * ```
 */
export function refuseTooDeep(body: unknown): void {
  const path = tooDeep(body);
  if (path === null) return;
  const message = tooDeepMessage(path);
  const at = message.indexOf(": nests ");
  throw badField(message.slice(0, at), message.slice(at + 2));
}

/**
 * A request value as text: a string as it is, a number or boolean written out, an object or list
 * as its JSON, `fallback` for null or absent. Never `String(value)`, which throws for an object
 * such as `{"toString": 1}` and turned such a field into a 500.
 *
 * @example
 * ```ts
 * asText(part.text); // "" when absent
 * asText({ cmd: "ls" }); // '{"cmd":"ls"}'
 * ```
 */
export function asText(value: unknown, fallback = ""): string {
  if (typeof value === "string") return value;
  if (value === null || value === undefined) return fallback;
  if (typeof value === "object") return JSON.stringify(value) ?? fallback;
  return String(value);
}

/**
 * Merges the leading `system`/`developer` messages into one leading `system` message and turns any
 * later `developer` message into `system` (chat templates know no `developer` role).
 *
 * @example
 * ```ts
 * mergeSystem([{ role: "developer", content: "a" }, { role: "system", content: "b" }, { role: "user", content: "q" }]);
 * // [{ role: "system", content: "a\n\nb" }, { role: "user", content: "q" }]
 * ```
 */
export function mergeSystem(messages: JsonObject[]): JsonObject[] {
  const isSys = (m: JsonObject) => m.role === "system" || m.role === "developer";
  let i = 0;
  const lead: JsonObject[] = [];
  while (i < messages.length && isSys(messages[i]!)) lead.push(messages[i++]!);
  const rest = messages.slice(i).map((m) => (m.role === "developer" ? { ...m, role: "system" } : m));
  if (lead.length === 0) return rest;
  if (lead.length === 1 && messages[0]!.role === "system") return [messages[0]!, ...rest];
  // A message given as text parts keeps them (the engine side joins parts, see partsContent);
  // whole messages are joined by a blank line.
  const texts = lead.map((m) => m.content);
  if (texts.every((c) => typeof c === "string"))
    return [{ role: "system", content: texts.join("\n\n") }, ...rest];
  const parts = texts.flatMap((c) =>
    typeof c === "string" ? [{ type: "text", text: c }] : objects(c).filter((p) => p.type === "text"),
  );
  return [{ role: "system", content: partsContent(parts) }, ...rest];
}

/**
 * The content of a message made of several parts, in the chat form: one text part is a plain
 * string; several stay a list of text parts, so the engine side joins them as the model's server
 * would (SGLang flattens the parts of a string-content template with a space, vLLM with a newline,
 * a template that iterates over `content` gets the list itself). Joining them here with nothing
 * between, as the proxy once did, glued a block's closing tag to the next block's first word.
 *
 * @example
 * ```ts
 * partsContent([{ type: "text", text: "a" }]); // "a"
 * partsContent([{ type: "text", text: "a" }, { type: "text", text: "b" }]); // the two parts, as given
 * ```
 */
export function partsContent(parts: JsonObject[]): string | JsonObject[] {
  if (parts.length === 0) return "";
  if (parts.length === 1 && parts[0]!.type === "text") return asText(parts[0]!.text);
  return parts;
}

/**
 * The assistant message of an internal completion (or an empty one).
 *
 * @example
 * ```ts
 * const m = messageOf(completion); m.content; m.tool_calls;
 * ```
 */
export function messageOf(completion: JsonObject): JsonObject {
  const choice = objects(completion.choices)[0];
  return choice && isObject(choice.message) ? choice.message : {};
}

/**
 * The first choice of an internal completion (or an empty object).
 *
 * @example
 * ```ts
 * choiceOf(completion).finish_reason; // "stop"
 * ```
 */
export function choiceOf(completion: JsonObject): JsonObject {
  return objects(completion.choices)[0] ?? {};
}

/** A tool call of an internal completion, flattened. */
export interface FlatToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * The tool calls of an assistant message, flattened to `{id, name, arguments}`.
 *
 * @example
 * ```ts
 * toolCallsOf(messageOf(completion)); // [{ id: "call_1", name: "bash", arguments: "{}" }]
 * ```
 */
export function toolCallsOf(message: JsonObject): FlatToolCall[] {
  return objects(message.tool_calls).map((c, i) => {
    const fn = isObject(c.function) ? c.function : {};
    const args = fn.arguments;
    return {
      id: typeof c.id === "string" ? c.id : `call_${i}`,
      name: typeof fn.name === "string" ? fn.name : "",
      arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
    };
  });
}

/**
 * The deltas that replay a complete answer: reasoning, text, then each tool call.
 *
 * @example
 * ```ts
 * for (const ev of completionDeltas(completion, false)) frames += writer.delta(ev);
 * ```
 */
export function completionDeltas(completion: JsonObject, wantLogprobs: boolean): DeltaEvent[] {
  const choice = choiceOf(completion);
  const message = messageOf(completion);
  const out: DeltaEvent[] = [];
  if (typeof message.reasoning_content === "string" && message.reasoning_content.length > 0) {
    out.push({ kind: "reasoning", text: message.reasoning_content });
  }
  if (typeof message.content === "string" && message.content.length > 0) {
    out.push({
      kind: "text",
      text: message.content,
      ...(wantLogprobs && choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {}),
    });
  }
  for (const call of toolCallsOf(message)) out.push({ kind: "tool_call", ...call });
  return out;
}

/**
 * A tool of the chat form, from a family's tool definition: its `name`, its `description` when it
 * is a string, the `parameters` schema the family gives, then any `extra` function fields.
 *
 * @example
 * ```ts
 * functionTool({ name: "bash", description: "Run a command" }, { type: "object", properties: {} });
 * // { type: "function", function: { name: "bash", description: "Run a command", parameters: {...} } }
 * ```
 */
export function functionTool(def: JsonObject, parameters: unknown, extra: JsonObject = {}): JsonObject {
  return {
    type: "function",
    function: {
      name: def.name,
      ...(typeof def.description === "string" ? { description: def.description } : {}),
      parameters,
      ...extra,
    },
  };
}

/**
 * One SSE frame; with `event` for families that name their events (Anthropic, Responses).
 *
 * @example
 * ```ts
 * sse({ type: "ping" }, "ping"); // 'event: ping\ndata: {"type":"ping"}\n\n'
 * ```
 */
export function sse(data: unknown, event?: string): string {
  const payload = typeof data === "string" ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ""}data: ${payload}\n\n`;
}

/**
 * Usage numbers of an internal completion.
 *
 * @example
 * ```ts
 * usageOf(completion); // { prompt: 12, completion: 5, cached: 0 }
 * ```
 */
export function usageOf(completion: JsonObject): { prompt: number; completion: number; cached: number } {
  const u = isObject(completion.usage) ? completion.usage : {};
  const details = isObject(u.prompt_tokens_details) ? u.prompt_tokens_details : {};
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    prompt: num(u.prompt_tokens),
    completion: num(u.completion_tokens),
    cached: num(details.cached_tokens),
  };
}
