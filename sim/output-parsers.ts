/**
 * The two output parsers SGLang runs on chat completions for Qwen3 models, re-implemented so the
 * simulated engine's `message` looks like a real server started with `--reasoning-parser qwen3
 * --tool-call-parser qwen25`.
 *
 * @module
 */

/** Text split into reasoning and answer. */
export interface SeparatedReasoning {
  reasoning: string | undefined;
  text: string;
}

/**
 * SGLang's `qwen3` reasoning parser (non-streaming): if the text contains `<think>`, everything
 * before `</think>` is reasoning (after removing `<think>` and stripping the whole text), the rest,
 * stripped, is the answer; without `</think>` all of it is reasoning. Without `<think>` the text is
 * left alone.
 *
 * @example
 * ```ts
 * separateReasoning("<think>\nhm\n</think>\n\n42"); // { reasoning: "hm\n", text: "42" }
 * ```
 */
export function separateReasoning(text: string): SeparatedReasoning {
  if (!text.includes("<think>")) return { reasoning: undefined, text };
  const processed = text.replaceAll("<think>", "").trim();
  const end = processed.indexOf("</think>");
  if (end === -1) return { reasoning: processed, text: "" };
  return { reasoning: processed.slice(0, end), text: processed.slice(end + "</think>".length).trim() };
}

/** One parsed tool call: `arguments` is a JSON string, as OpenAI clients expect. */
export interface ParsedToolCall {
  name: string;
  arguments: string;
}

/**
 * Python's `json.dumps(value, ensure_ascii=False)`: `", "` and `": "` separators. SGLang
 * re-serialises parsed tool arguments this way, so clients see this spacing.
 *
 * @example
 * ```ts
 * pythonJsonDumps({ a: [1, 2] }); // '{"a": [1, 2]}'
 * ```
 */
export function pythonJsonDumps(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(pythonJsonDumps).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pythonJsonDumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * SGLang's `qwen25` tool-call parser: `normal` is the text before the first `<tool_call>` (stripped),
 * each `<tool_call>\n{json}\n</tool_call>` whose JSON parses and whose name is one of `toolNames`
 * becomes a call. Malformed blocks are dropped, as SGLang does.
 *
 * @example
 * ```ts
 * parseToolCalls('<tool_call>\n{"name": "calc", "arguments": {"x": 1}}\n</tool_call>', ["calc"]);
 * // { normal: "", calls: [{ name: "calc", arguments: '{"x": 1}' }] }
 * ```
 */
export function parseToolCalls(
  text: string,
  toolNames: readonly string[],
): { normal: string; calls: ParsedToolCall[] } {
  const start = text.indexOf("<tool_call>\n");
  if (start === -1) return { normal: text, calls: [] };
  const normal = text.slice(0, start).trim();
  const calls: ParsedToolCall[] = [];
  for (const m of text.matchAll(/<tool_call>\n([\s\S]*?)\n<\/tool_call>/g)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(m[1]!.trim());
    } catch {
      continue;
    }
    for (const act of Array.isArray(parsed) ? parsed : [parsed]) {
      if (!act || typeof act !== "object") continue;
      const {
        name,
        parameters,
        arguments: args,
      } = act as { name?: unknown; parameters?: unknown; arguments?: unknown };
      if (typeof name !== "string" || !toolNames.includes(name)) continue;
      calls.push({ name, arguments: pythonJsonDumps(parameters ?? args ?? {}) });
    }
  }
  return { normal, calls };
}
