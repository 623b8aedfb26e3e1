/**
 * The Qwen3-Coder XML tool-call format:
 *
 * ```
 * <tool_call>
 * <function=read_file>
 * <parameter=path>
 * src/main.ts
 * </parameter>
 * </function>
 * </tool_call>
 * ```
 *
 * Values carry no types; they are typed with the tool's JSON schema, as SGLang's and vLLM's
 * `qwen3_coder` parsers do (`_convert_param_value`).
 *
 * @module
 */
import type { ToolDefinition } from "../chat-tokenizer";
import { pythonJsonDumps, tryParseJson } from "./json-text";
import { isKnownTool, type ParsedCall, type ToolCallParser, type ToolCallSplit } from "./types";

const BLOCK = /<tool_call>([\s\S]*?)<\/tool_call>/g;
const FUNCTION = /^\s*<function=([^>\n]+)>([\s\S]*?)<\/function>\s*$/;
// A value ends at its closing tag; models sometimes omit it before the next parameter.
const PARAMETER = /<parameter=([^>\n]+)>([\s\S]*?)(?:<\/parameter>|(?=<parameter=)|$)/g;

type Schema = Record<string, unknown>;

function propertySchema(tools: readonly ToolDefinition[], fn: string, param: string): Schema | undefined {
  const tool = tools.find((t) => t.function.name === fn);
  const params = tool?.function.parameters as Schema | undefined;
  const props = params?.properties as Record<string, Schema> | undefined;
  const schema = props?.[param];
  return typeof schema === "object" && schema !== null ? schema : undefined;
}

/** The JSON-schema type names a property allows (`type`, a list of types, or `anyOf`/`oneOf`). */
function schemaTypes(schema: Schema): string[] {
  const t = schema.type;
  if (typeof t === "string") return [t];
  if (Array.isArray(t)) return t.filter((x): x is string => typeof x === "string");
  for (const key of ["anyOf", "oneOf"]) {
    const alts = schema[key];
    if (Array.isArray(alts)) return alts.flatMap((a) => (a && typeof a === "object" ? schemaTypes(a) : []));
  }
  return [];
}

/**
 * Types one raw value by its schema. Unknown parameters stay strings; a value that does not fit
 * its declared type also stays a string (the model's text is never lost).
 *
 * @example
 * ```ts
 * typeXmlValue("42", { type: "integer" }); // 42
 * typeXmlValue("42", { type: "string" }); // "42"
 * typeXmlValue("[1, 2]", { type: "array" }); // [1, 2]
 * ```
 */
export function typeXmlValue(raw: string, schema: Schema | undefined): unknown {
  if (schema === undefined) return raw;
  const types = schemaTypes(schema);
  if (raw.trim().toLowerCase() === "null" && (types.length === 0 || types.includes("null"))) return null;
  if (types.includes("string")) return raw;
  for (const type of types) {
    const v = raw.trim();
    if (type === "integer" && /^-?\d+$/.test(v)) return Number.parseInt(v, 10);
    if (type === "number" && v !== "" && Number.isFinite(Number(v))) return Number(v);
    if (type === "boolean" && (v.toLowerCase() === "true" || v.toLowerCase() === "false")) {
      return v.toLowerCase() === "true";
    }
    if (type === "object" || type === "array") {
      const parsed = tryParseJson(v);
      if (parsed !== undefined && (type === "array") === Array.isArray(parsed)) return parsed;
    }
  }
  // No declared type: JSON if it is JSON, text otherwise.
  if (types.length === 0) {
    const parsed = tryParseJson(raw.trim());
    if (parsed !== undefined) return parsed;
  }
  return raw;
}

/** The value between the tags without the one newline the format puts on each side. */
function trimValue(raw: string): string {
  let v = raw.startsWith("\n") ? raw.slice(1) : raw;
  if (v.endsWith("\n")) v = v.slice(0, -1);
  return v;
}

function callOfBlock(inner: string, context: Parameters<ToolCallParser["parse"]>[1]): ParsedCall | null {
  const fn = FUNCTION.exec(inner);
  if (!fn) return null;
  const name = fn[1]!.trim();
  if (!isKnownTool(name, context)) return null;
  const body = fn[2]!;
  const args: Record<string, unknown> = {};
  for (const p of body.matchAll(PARAMETER)) {
    const param = p[1]!.trim();
    args[param] = typeXmlValue(trimValue(p[2]!), propertySchema(context.tools, name, param));
  }
  // Anything but whitespace outside the parameter tags means the block is not what we think it is.
  if (body.replace(PARAMETER, "").trim() !== "") return null;
  return { name, arguments: pythonJsonDumps(args) };
}

/**
 * The `qwen3_coder` parser: each `<tool_call><function=…>…</function></tool_call>` block becomes a
 * call with schema-typed arguments; a block that does not have that shape, or names a tool the
 * request did not offer, is kept as text.
 *
 * @example
 * ```ts
 * qwen3CoderToolCallParser.parse(
 *   "<tool_call>\n<function=calc>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
 *   { tools: [{ type: "function", function: { name: "calc", parameters: { properties: { x: { type: "integer" } } } } }] },
 * ); // { text: "", calls: [{ name: "calc", arguments: '{"x": 1}' }] }
 * ```
 */
export const qwen3CoderToolCallParser: ToolCallParser = {
  name: "qwen3_coder",
  parse(text, context): ToolCallSplit {
    const calls: ParsedCall[] = [];
    let rest = "";
    let last = 0;
    for (const m of text.matchAll(BLOCK)) {
      const call = callOfBlock(m[1]!, context);
      if (call === null) continue;
      rest += text.slice(last, m.index);
      last = m.index + m[0].length;
      calls.push(call);
    }
    rest += text.slice(last);
    return { text: rest, calls };
  },
};
