/**
 * Reasoning separation for `<think>…</think>` models (Qwen3, QwQ, DeepSeek-R1 style).
 *
 * @module
 */

/** Sampled text split into reasoning and the rest. */
export interface ReasoningSplit {
  /** Text inside the think block, or null when there was none. */
  reasoning: string | null;
  /** Text after the think block (all of it when there was none). */
  text: string;
}

/** Options of {@link separateThinking}. */
export interface ThinkingOptions {
  /**
   * The prompt already opened the think block (a generation prompt ending in `<think>\n`, as
   * thinking-only Qwen3 variants render), so the output starts inside it. SGLang's
   * `qwen3-thinking` / `force_reasoning`.
   */
  startsInReasoning?: boolean;
}

const OPEN = "<think>";
const CLOSE = "</think>";

/**
 * SGLang's `qwen3` reasoning parser, non-streaming (`BaseReasoningFormatDetector.detect_and_parse`):
 * when the output is in reasoning (it contains `<think>`, or it starts inside the block), `<think>`
 * is removed and the text stripped; the part before `</think>` is the reasoning and the rest,
 * stripped, the answer. Without `</think>` (cut off by `length`) everything is reasoning.
 *
 * One addition: an output holding `</think>` with no `<think>` before it is treated as starting
 * inside the block (a thinking-only template opened it), as newer SGLang versions do.
 *
 * @example
 * ```ts
 * separateThinking("<think>\nhm\n</think>\n\n42"); // { reasoning: "hm\n", text: "42" }
 * separateThinking("hm\n</think>\n\n42"); // { reasoning: "hm\n", text: "42" }
 * separateThinking("just text"); // { reasoning: null, text: "just text" }
 * ```
 */
export function separateThinking(text: string, options: ThinkingOptions = {}): ReasoningSplit {
  const open = text.indexOf(OPEN);
  const close = text.indexOf(CLOSE);
  const inReasoning =
    options.startsInReasoning === true || open !== -1 || (close !== -1 && (open === -1 || open > close));
  if (!inReasoning) return { reasoning: null, text };
  const processed = text.replaceAll(OPEN, "").trim();
  const end = processed.indexOf(CLOSE);
  if (end === -1) return { reasoning: processed, text: "" };
  return { reasoning: processed.slice(0, end), text: processed.slice(end + CLOSE.length).trim() };
}
