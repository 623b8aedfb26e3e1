/**
 * Message normalisation for matching a harness's echoed history against what the proxy returned.
 * Harnesses change what they send back without changing what was said: `content: null` becomes
 * `""`, tool-call arguments are re-serialised (key order, whitespace), call ids are added,
 * renamed or stripped, one assistant message with text and calls is split into two, reasoning is
 * dropped or kept, reasoning is repeated as the message's text, text content becomes a list of parts, tool-call arguments the model left out
 * come back filled in with their schema default (`tool-defaults.ts`). Two histories are "the same"
 * when their normalised forms are equal.
 *
 * @module
 */
import { createHash } from "node:crypto";
import type { ChatMessage } from "../chat-tokenizer";
import { canonicalJson, tryParseJson } from "../parsers/json-text";
import { type ToolSchemas, toolSchemas, withoutDefaults } from "./tool-defaults";

/** One normalised message: a string key plus the raw index range it came from. */
export interface NormalizedMessage {
  /** Canonical JSON of what the message says; equal keys ⇔ equal messages for matching. */
  key: string;
  /** Characters of content it carries (for "was the history shortened?"). */
  chars: number;
  /** Index of the last raw message folded into this one. */
  rawEnd: number;
  role: string;
}

const isObj = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) => {
      if (!isObj(p)) return "";
      if (p.type === "text" || p.type === "input_text") return typeof p.text === "string" ? p.text : "";
      // Media parts: identified by their source, so a changed image is a changed message.
      const ref = p.image_url ?? p.url ?? p.source;
      const src = typeof ref === "string" ? ref : isObj(ref) && typeof ref.url === "string" ? ref.url : "";
      return `\u0000${String(p.type)}:${createHash("sha1").update(src).digest("hex")}\u0000`;
    })
    .join("");
}

function toolCallKey(call: unknown, schemas: ToolSchemas): string {
  if (!isObj(call) || !isObj(call.function)) return canonicalJson(call);
  const fn = call.function;
  let args: unknown = fn.arguments;
  if (typeof args === "string") {
    const trimmed = args.trim();
    args = ["", "null", "None"].includes(trimmed) ? {} : (tryParseJson(trimmed) ?? args);
  }
  // Keys at their declared default are dropped on both sides: the returned call and its echo
  // match when they differ only by such keys (Claude Code adds `replace_all: false` to `Edit`).
  const schema = typeof fn.name === "string" ? schemas.get(fn.name) : undefined;
  if (schema) args = withoutDefaults(args, schema);
  return canonicalJson({ name: fn.name, arguments: args ?? {} });
}

const reasoningOf = (m: ChatMessage): string =>
  typeof m.reasoning_content === "string" ? m.reasoning_content.trim() : "";

interface Fields {
  role: string;
  content: string;
  calls: string[];
}

function fieldsOf(m: ChatMessage, schemas: ToolSchemas): Fields {
  const role = m.role;
  let content = contentText(m.content);
  // Assistant text is compared trimmed: parsers strip it, some harnesses strip it again.
  if (role === "assistant") content = content.trim();
  // Text that only repeats the message's own reasoning is the reasoning echoed as an answer (Copilot
  // CLI turned a Responses reasoning item's `reasoning_text` into an assistant message): it was
  // never sampled as text, so the turn still extends the one the proxy returned.
  if (role === "assistant" && content !== "" && content === reasoningOf(m)) content = "";
  const calls =
    role === "assistant" && Array.isArray(m.tool_calls)
      ? m.tool_calls.map((c) => toolCallKey(c, schemas))
      : [];
  return { role, content, calls };
}

/**
 * Normalises a message list: ids, reasoning and unknown keys dropped, content flattened to text,
 * assistant text trimmed, tool-call arguments canonical and without the keys whose value is the
 * default declared in `tools` (the request's OpenAI-shaped tools), consecutive assistant messages
 * merged (a harness may split text and calls into two).
 *
 * @example
 * ```ts
 * const a = normalizeMessages([{ role: "assistant", content: null, tool_calls: [{ id: "x", function: { name: "f", arguments: '{"b": 1, "a": 2}' } }] }]);
 * const b = normalizeMessages([{ role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: '{"a":2,"b":1}' } }] }]);
 * a[0].key === b[0].key; // true
 * ```
 */
export function normalizeMessages(
  messages: readonly ChatMessage[],
  tools?: readonly unknown[],
): NormalizedMessage[] {
  const schemas = toolSchemas(tools);
  const out: Array<Fields & { rawEnd: number }> = [];
  messages.forEach((m, i) => {
    const f = fieldsOf(m, schemas);
    const prev = out.at(-1);
    if (f.role === "assistant" && prev?.role === "assistant") {
      prev.content = [prev.content, f.content].filter((c) => c !== "").join("\n");
      prev.calls.push(...f.calls);
      prev.rawEnd = i;
      return;
    }
    out.push({ ...f, rawEnd: i });
  });
  return out.map((f) => ({
    key: JSON.stringify([f.role, f.content, f.calls]),
    chars: f.content.length + f.calls.reduce((n, c) => n + c.length, 0),
    rawEnd: f.rawEnd,
    role: f.role,
  }));
}

/**
 * Chained hashes of the normalised prefixes: `keys[j]` identifies messages `0..j`. Two lists with
 * the same `keys[j]` agree on their first `j + 1` normalised messages.
 *
 * @example
 * ```ts
 * prefixKeys(normalizeMessages(messages)).at(-1); // key of the whole history
 * ```
 */
export function prefixKeys(normalized: readonly NormalizedMessage[]): string[] {
  const keys: string[] = [];
  let h = "";
  for (const m of normalized) {
    h = createHash("sha1").update(h).update("\u0000").update(m.key).digest("hex");
    keys.push(h);
  }
  return keys;
}

/**
 * Key of the request settings that change the rendered prompt besides the messages: tools and
 * template kwargs. A history can only be extended under the same settings.
 *
 * @example
 * ```ts
 * settingsKey([], { enable_thinking: false }); // '[[],{"enable_thinking":false}]'
 * ```
 */
export function settingsKey(
  tools: readonly unknown[] | undefined,
  kwargs: Record<string, unknown> | undefined,
): string {
  return canonicalJson([tools ?? [], kwargs ?? {}]);
}
