/**
 * Which known format a model folder's chat template writes, read from the template itself: how it
 * renders an assistant's tool calls is how the model was trained to write them, so the markers it
 * writes name the tool-call parser; a template that writes `<think>` blocks names the reasoning
 * parser. `tokenizer_config.json` fields are not used: they name a tokenizer class, not a format.
 *
 * - `<|im_start|>` turns with `<tool_call>` blocks: the `qwen3` family's format (Qwen2.5, Qwen3,
 *   Hermes-style models); `<function=NAME><parameter=…>` inside the block is Qwen3-Coder's XML
 *   calls (`qwen3_coder`), JSON otherwise (`qwen3`). Reasoning `qwen3` when the template writes
 *   `<think>`, else `none`.
 * - `<｜tool▁calls▁begin｜>` sections whose calls are `TYPE<｜tool▁sep｜>NAME` with a ```` ```json ````
 *   block and no `<think>`: the `deepseek_v3` family's format (`deepseekv3`, reasoning `none`).
 *   DeepSeek's later formats (V3.1's `NAME<｜tool▁sep｜>ARGS`, R1's think blocks) are not this one.
 * - anything else is not recognised, and says why.
 *
 * @module
 */
import type { ModelFamilyName } from "../families";
import type { ReasoningParserName } from "../parsers";

/** A template in a format Polar-TS parses. */
export interface RecognisedFormat {
  family: ModelFamilyName;
  /** Polar's tool-call parser name for it. */
  toolCallParser: string;
  reasoningParser: ReasoningParserName;
  /** What in the template showed it, for the start-up log. */
  evidence: string;
}

/** A template in no format Polar-TS parses. */
export interface UnrecognisedFormat {
  family: null;
  /** Why not, for the start-up log (the markers looked for, or the near miss). */
  reason: string;
}

const DS_CALLS = "<｜tool▁calls▁begin｜>";

/**
 * The known format `source` (a chat template) writes, or why it is none.
 *
 * @example
 * ```ts
 * recogniseTemplate(qwen3Template); // { family: "qwen3", toolCallParser: "qwen3", reasoningParser: "qwen3", evidence: "…" }
 * recogniseTemplate("{{ messages[0].content }}").family; // null
 * ```
 */
export function recogniseTemplate(source: string): RecognisedFormat | UnrecognisedFormat {
  const thinks = source.includes("<think>");
  if (source.includes("<|im_start|>") && source.includes("<tool_call>")) {
    const xml = source.includes("<function=") && source.includes("<parameter=");
    return {
      family: "qwen3",
      toolCallParser: xml ? "qwen3_coder" : "qwen3",
      reasoningParser: thinks ? "qwen3" : "none",
      evidence: `<|im_start|> turns with <tool_call> ${xml ? "<function=…><parameter=…> XML" : "JSON"} calls${thinks ? " and <think> blocks" : ", no <think>"}`,
    };
  }
  if (source.includes(DS_CALLS)) {
    if (source.includes("<｜tool▁sep｜>") && source.includes("```json") && !thinks) {
      return {
        family: "deepseek_v3",
        toolCallParser: "deepseekv3",
        reasoningParser: "none",
        evidence: `${DS_CALLS} sections with \`\`\`json arguments, no <think>`,
      };
    }
    return {
      family: null,
      reason: `it writes DeepSeek's ${DS_CALLS} sections, but not DeepSeek V3's call format (\`\`\`json arguments, no <think>): a later DeepSeek format`,
    };
  }
  const writesTools = /\btools\b/.test(source);
  return {
    family: null,
    reason: `it writes neither <|im_start|> turns with <tool_call> blocks (qwen3) nor ${DS_CALLS} sections (deepseek_v3)${writesTools ? "" : ", and renders no tools"}`,
  };
}
