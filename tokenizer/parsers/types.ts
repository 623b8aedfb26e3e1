/**
 * Shapes shared by the output parsers.
 *
 * @module
 */
import type { ToolDefinition } from "../chat-tokenizer";

/** One tool call as the parser found it: `arguments` is a JSON object serialised as a string. */
export interface ParsedCall {
  name: string;
  arguments: string;
}

/** What a tool-call parser returns: the text that is not a (well-formed) call, and the calls. */
export interface ToolCallSplit {
  /** Text outside the recognised calls, malformed call blocks included verbatim; not trimmed. */
  text: string;
  calls: ParsedCall[];
}

/** What a tool-call parser is given besides the text. */
export interface ToolParseContext {
  /**
   * The tools of the request. When non-empty, a call to a name not in the list is not a call (it
   * stays in the text); when empty, any name is accepted. Their JSON schemas type the values of
   * formats that carry no types (Qwen3-Coder XML).
   */
  tools: readonly ToolDefinition[];
}

/** A named tool-call format. */
export interface ToolCallParser {
  readonly name: string;
  /** Never throws on model output: what cannot be parsed stays text. */
  parse(text: string, context: ToolParseContext): ToolCallSplit;
}

/**
 * `true` when `name` may be called under `context` (listed, or no tools given at all).
 *
 * @example
 * ```ts
 * isKnownTool("calc", { tools: [] }); // true
 * ```
 */
export function isKnownTool(name: string, context: ToolParseContext): boolean {
  return context.tools.length === 0 || context.tools.some((t) => t.function.name === name);
}
