/**
 * Parsing sampled text back into the harness's API view (reasoning, content, tool calls), with a
 * registry of parsers by name. The view is for the harness only: training always uses the sampled
 * ids, which this module never touches.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import type { ToolDefinition } from "../chat-tokenizer";
import { deepseekV3ToolCallParser } from "./deepseek-v3";
import { jsonToolCallParser } from "./json-tool-calls";
import { qwen3CoderToolCallParser } from "./qwen3-coder";
import { separateThinking } from "./reasoning";
import type { ToolCallParser } from "./types";

export { DEEPSEEK_V3_TOOL_TOKENS, deepseekV3ToolCallParser } from "./deepseek-v3";
export { canonicalJson, pythonJsonDumps, tryParseJson } from "./json-text";
export { jsonToolCallParser } from "./json-tool-calls";
export { qwen3CoderToolCallParser, typeXmlValue } from "./qwen3-coder";
export { type ReasoningSplit, separateThinking, type ThinkingOptions } from "./reasoning";
export type { ParsedCall, ToolCallParser, ToolCallSplit, ToolParseContext } from "./types";

/** An OpenAI tool call as returned to the harness. */
export interface ToolCallView {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** The assistant message's API view of one sampled output. */
export interface AssistantView {
  /** Think-block text, or null when the output had none (or reasoning parsing is off). */
  reasoning_content: string | null;
  /** Answer text; null when it is empty and there are tool calls (what OpenAI clients expect). */
  content: string | null;
  tool_calls: ToolCallView[];
}

/**
 * A parser name that is not registered.
 *
 * @example
 * ```ts
 * try { toolCallParser("nope"); } catch (e) { (e as UnknownParserError).field; } // "tool_call_parser"
 * ```
 */
export class UnknownParserError extends Error {
  override readonly name = "UnknownParserError";
  constructor(
    readonly field: "tool_call_parser" | "reasoning_parser",
    value: string,
    known: readonly string[],
  ) {
    super(`${field}: unknown parser "${value}" (known: ${known.join(", ")})`);
  }
}

const TOOL_PARSERS: ReadonlyMap<string, ToolCallParser> = new Map<string, ToolCallParser>([
  ["qwen3", jsonToolCallParser("qwen3")],
  // SGLang's names for the same format: Qwen2.5/Qwen3 instruct models use `qwen25`/`qwen`.
  ["qwen25", jsonToolCallParser("qwen25")],
  ["qwen", jsonToolCallParser("qwen")],
  ["hermes", jsonToolCallParser("hermes")],
  ["qwen3_coder", qwen3CoderToolCallParser],
  // SGLang's name for DeepSeek V3's format (`--tool-call-parser deepseekv3`).
  ["deepseekv3", deepseekV3ToolCallParser],
]);

/**
 * Reasoning parser names: `qwen3` (think tags), `qwen3-thinking` and `deepseek-r1` (the output starts
 * inside the think block, as the template opened it), `none` (no separation).
 */
export const REASONING_PARSERS = ["qwen3", "qwen3-thinking", "deepseek-r1", "none"] as const;
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

/**
 * Names of the registered tool-call parsers.
 *
 * @example
 * ```ts
 * toolCallParserNames(); // ["qwen3", "qwen25", "qwen", "hermes", "qwen3_coder", "deepseekv3"]
 * ```
 */
export function toolCallParserNames(): string[] {
  return [...TOOL_PARSERS.keys()];
}

/**
 * The tool-call parser registered under `name`.
 *
 * @example
 * ```ts
 * toolCallParser("qwen3_coder").parse(text, { tools });
 * ```
 */
export function toolCallParser(name: string): ToolCallParser {
  const parser = TOOL_PARSERS.get(name);
  if (!parser) throw new UnknownParserError("tool_call_parser", name, toolCallParserNames());
  return parser;
}

function reasoningParser(name: string): ReasoningParserName {
  if (!(REASONING_PARSERS as readonly string[]).includes(name)) {
    throw new UnknownParserError("reasoning_parser", name, REASONING_PARSERS);
  }
  return name as ReasoningParserName;
}

/**
 * `call_<24 hex>`, the shape SGLang gives tool-call ids.
 *
 * @example
 * ```ts
 * newToolCallId(); // "call_5f0c…"
 * ```
 */
export function newToolCallId(): string {
  return `call_${randomBytes(12).toString("hex")}`;
}

/** Options of {@link parseAssistantOutput}. */
export interface ParseOutputOptions {
  /** Tool-call format (`qwen3`, `hermes`, `qwen3_coder`, `deepseekv3`, …), or null for none. Default `qwen3`. */
  toolCallParser?: string | null;
  /** Reasoning format; default `qwen3`. */
  reasoningParser?: string;
  /** Tools of the request. Without tools no tool calls are parsed, as an OpenAI server does. */
  tools?: readonly ToolDefinition[];
  /** The prompt opened a think block (generation prompt ends in `<think>\n`). */
  startsInReasoning?: boolean;
  /** Id for the i-th call; default {@link newToolCallId}. */
  makeId?: (index: number) => string;
}

/**
 * Turns the visible sampled text of one turn (special tokens kept, end-of-turn token removed; see
 * `visibleOutputText` in `sglang-generate.ts`) into the assistant message the harness gets.
 * Never throws on model output; unknown parser names throw {@link UnknownParserError}.
 *
 * @example
 * ```ts
 * parseAssistantOutput(
 *   '<think>\nAdd.\n</think>\n\n<tool_call>\n{"name": "calc", "arguments": {"expr": "1+2"}}\n</tool_call>',
 *   { tools: [{ type: "function", function: { name: "calc" } }], makeId: (i) => `call_${i}` },
 * );
 * // { reasoning_content: "Add.\n", content: null,
 * //   tool_calls: [{ id: "call_0", type: "function", function: { name: "calc", arguments: '{"expr": "1+2"}' } }] }
 * ```
 */
export function parseAssistantOutput(text: string, options: ParseOutputOptions = {}): AssistantView {
  const reasoning = reasoningParser(options.reasoningParser ?? "qwen3");
  const toolParserName = options.toolCallParser === undefined ? "qwen3" : options.toolCallParser;
  const parser = toolParserName === null ? null : toolCallParser(toolParserName);
  const split =
    reasoning === "none"
      ? { reasoning: null, text }
      : separateThinking(text, {
          startsInReasoning:
            options.startsInReasoning === true ||
            reasoning === "qwen3-thinking" ||
            reasoning === "deepseek-r1",
        });
  const tools = options.tools ?? [];
  const parsed =
    parser && tools.length > 0 ? parser.parse(split.text, { tools }) : { text: split.text, calls: [] };
  const makeId = options.makeId ?? newToolCallId;
  const content = parsed.text.trim();
  return {
    reasoning_content: split.reasoning,
    content: content === "" && parsed.calls.length > 0 ? null : content,
    tool_calls: parsed.calls.map((c, i) => ({
      id: makeId(i),
      type: "function",
      function: { name: c.name, arguments: c.arguments },
    })),
  };
}
