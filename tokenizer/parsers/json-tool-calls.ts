/**
 * The Qwen3 / Qwen2.5 / Hermes tool-call format: each call is a JSON object
 * `{"name": …, "arguments": {…}}` inside `<tool_call>…</tool_call>`, several calls in a row for
 * parallel calls. This is what the Qwen3 chat template asks for in its system prompt.
 *
 * @module
 */
import { pythonJsonDumps, tryParseJson } from "./json-text";
import { isKnownTool, type ParsedCall, type ToolCallParser, type ToolCallSplit } from "./types";

// Whitespace around the JSON is free: Qwen emits "<tool_call>\n{…}\n</tool_call>", Hermes-style
// models sometimes omit the newlines. A block without its closing tag (cut off by `length`) is
// not matched and so stays text.
const BLOCK = /<tool_call>([\s\S]*?)<\/tool_call>/g;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The calls of one block's JSON, or null when any part of it is not a valid call. */
function callsOfBlock(json: string, context: Parameters<ToolCallParser["parse"]>[1]): ParsedCall[] | null {
  const parsed = tryParseJson(json.trim());
  const acts = Array.isArray(parsed) ? parsed : [parsed];
  if (acts.length === 0) return null;
  const calls: ParsedCall[] = [];
  for (const act of acts) {
    if (!isObject(act) || typeof act.name !== "string" || !isKnownTool(act.name, context)) return null;
    let args: unknown = act.arguments ?? act.parameters ?? {};
    // Some models emit the arguments as a JSON string; accept it when it holds an object.
    if (typeof args === "string") args = tryParseJson(args);
    if (!isObject(args)) return null;
    calls.push({ name: act.name, arguments: pythonJsonDumps(args) });
  }
  return calls;
}

/**
 * Splits `<tool_call>{json}</tool_call>` blocks out of sampled text. A block whose JSON does not
 * parse, lacks a string `name`, names a tool the request did not offer, or has non-object
 * arguments is kept as text (SGLang drops such blocks or gives up on the whole text; keeping the
 * text lets the harness show the model's mistake).
 *
 * @example
 * ```ts
 * jsonToolCallParser("qwen3").parse(
 *   'ok\n<tool_call>\n{"name": "calc", "arguments": {"x": 1}}\n</tool_call>',
 *   { tools: [] },
 * ); // { text: "ok\n", calls: [{ name: "calc", arguments: '{"x": 1}' }] }
 * ```
 */
export function jsonToolCallParser(name: string): ToolCallParser {
  return {
    name,
    parse(text, context): ToolCallSplit {
      const calls: ParsedCall[] = [];
      let rest = "";
      let last = 0;
      for (const m of text.matchAll(BLOCK)) {
        const blockCalls = callsOfBlock(m[1]!, context);
        if (blockCalls === null) continue; // stays in the text
        rest += text.slice(last, m.index);
        last = m.index + m[0].length;
        calls.push(...blockCalls);
      }
      rest += text.slice(last);
      return { text: rest, calls };
    },
  };
}
