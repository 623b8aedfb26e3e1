/**
 * The DeepSeek V3 tool-call format (SGLang's `deepseekv3` parser): a calls section between
 * `<｜tool▁calls▁begin｜>` and `<｜tool▁calls▁end｜>` holding one block per call,
 *
 * ```text
 * <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
 * ```json
 * {ARGUMENTS}
 * ```<｜tool▁call▁end｜>
 * ```
 *
 * with a newline between blocks. The markers are added tokens of the DeepSeek V3 vocabulary (ids
 * 128806–128814) that its `tokenizer.json` does not mark special: a decode that skips special
 * tokens keeps them, so the parser sees them however the sampled ids were decoded.
 *
 * @module
 */
import { pythonJsonDumps, tryParseJson } from "./json-text";
import {
  isKnownTool,
  type ParsedCall,
  type ToolCallParser,
  type ToolCallSplit,
  type ToolParseContext,
} from "./types";

/** The special tokens of the format, by role. */
export const DEEPSEEK_V3_TOOL_TOKENS = {
  callsBegin: "<｜tool▁calls▁begin｜>",
  callsEnd: "<｜tool▁calls▁end｜>",
  callBegin: "<｜tool▁call▁begin｜>",
  callEnd: "<｜tool▁call▁end｜>",
  sep: "<｜tool▁sep｜>",
} as const;

const T = DEEPSEEK_V3_TOOL_TOKENS;
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** One complete call block; a block cut off before its end marker is not matched. */
const BLOCK = new RegExp(`${literal(T.callBegin)}([\\s\\S]*?)${literal(T.callEnd)}`, "g");
/** A block's body: the call type, the name on its own line, the arguments in a json fence. */
const BODY = new RegExp(
  `^([^\\n]*?)${literal(T.sep)}([^\\n]+)\\n\`\`\`(?:json)?\\n([\\s\\S]*?)\\n?\`\`\`\\s*$`,
);

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The call of one block's body, or null when it is not a well-formed call of a known tool. */
function callOfBody(body: string, context: ToolParseContext): ParsedCall | null {
  const m = BODY.exec(body);
  if (!m) return null;
  const [, type, rawName, json] = m as unknown as [string, string, string, string];
  const name = rawName.trim();
  if (type.trim() !== "function" || name === "" || !isKnownTool(name, context)) return null;
  const args = tryParseJson(json.trim());
  if (!isObject(args)) return null;
  return { name, arguments: pythonJsonDumps(args) };
}

/**
 * Parses one calls section (without its markers): the calls of its well-formed blocks, and what
 * is left of it (malformed blocks verbatim, any other text), which is "" when every part of it
 * was a call.
 */
function parseSection(section: string, context: ToolParseContext): { calls: ParsedCall[]; left: string } {
  const calls: ParsedCall[] = [];
  let left = "";
  let last = 0;
  for (const m of section.matchAll(BLOCK)) {
    const call = callOfBody(m[1]!, context);
    if (call === null) continue; // stays in what is left
    left += section.slice(last, m.index);
    last = m.index + m[0].length;
    calls.push(call);
  }
  left += section.slice(last);
  // Newlines between blocks are the format's separators, not text.
  return { calls, left: left.trim() === "" ? "" : left };
}

/**
 * Splits DeepSeek V3 tool calls out of sampled text. Each calls section is parsed block by block:
 * well-formed calls of offered tools are taken out; a block that is malformed (not `function`,
 * no json fence, arguments that are not a JSON object) or names a tool the request did not offer
 * stays in the text, with the section's markers around it so the harness sees what the model
 * wrote. A section the output cut off (no end marker) gives the complete blocks it holds, as
 * SGLang's parser does.
 *
 * @example
 * ```ts
 * deepseekV3ToolCallParser.parse(
 *   "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calc\n```json\n{\"x\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
 *   { tools: [] },
 * ); // { text: "Let me check.", calls: [{ name: "calc", arguments: '{"x": 1}' }] }
 * ```
 */
export const deepseekV3ToolCallParser: ToolCallParser = {
  name: "deepseekv3",
  parse(text, context): ToolCallSplit {
    const calls: ParsedCall[] = [];
    let rest = "";
    let from = 0;
    for (;;) {
      const begin = text.indexOf(T.callsBegin, from);
      if (begin < 0) break;
      const bodyStart = begin + T.callsBegin.length;
      const endAt = text.indexOf(T.callsEnd, bodyStart);
      const bodyEnd = endAt < 0 ? text.length : endAt;
      const sectionEnd = endAt < 0 ? text.length : endAt + T.callsEnd.length;
      const { calls: found, left } = parseSection(text.slice(bodyStart, bodyEnd), context);
      rest += text.slice(from, begin);
      if (left !== "") rest += T.callsBegin + left + (endAt < 0 ? "" : T.callsEnd);
      calls.push(...found);
      from = sectionEnd;
    }
    rest += text.slice(from);
    return { text: rest, calls };
  },
};
