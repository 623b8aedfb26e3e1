/**
 * What a model of each token-mode family samples in the `bench:tokens` corpus: how it writes a
 * tool call and whether it writes think blocks. The corpus (tasks, calls, drift words, harness
 * behaviour) is the same for every family; only this dialect differs, so the families' figures
 * compare like with like.
 *
 * @module
 */
import type { ModelFamily, ModelFamilyName } from "../../tokenizer/families";
import { DEEPSEEK_V3_TOOL_TOKENS as DS } from "../../tokenizer/parsers";

/** A family's way of writing the bench's sampled outputs. */
export interface FamilyOutputs {
  /** The family's tokenizer and template, as the report names them. */
  readonly describes: string;
  /** Whether the family writes `<think>` blocks (its reasoning parser is not `none`). */
  readonly thinks: boolean;
  /** One tool call as the model samples it; `argsJson` is already `json.dumps`-spaced. */
  callText(name: string, argsJson: string): string;
}

const DIALECTS: Record<ModelFamilyName, Omit<FamilyOutputs, "thinks">> = {
  qwen3: {
    describes: "real Qwen3 tokenizer and template",
    callText: (name, argsJson) => `<tool_call>\n{"name": "${name}", "arguments": ${argsJson}}\n</tool_call>`,
  },
  deepseek_v3: {
    describes: "real DeepSeek V3 tokenizer, DEEPSEEK_V3_TOOL_TEMPLATE",
    callText: (name, argsJson) =>
      `${DS.callsBegin}${DS.callBegin}function${DS.sep}${name}\n\`\`\`json\n${argsJson}\n\`\`\`${DS.callEnd}${DS.callsEnd}`,
  },
};

/**
 * The bench dialect of `family`.
 *
 * @example
 * ```ts
 * familyOutputs(modelFamily("deepseek_v3")).callText("bash", '{"cmd": "ls"}');
 * // "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{\"cmd\": \"ls\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
 * ```
 */
export function familyOutputs(family: ModelFamily): FamilyOutputs {
  return { ...DIALECTS[family.name], thinks: family.reasoningParser !== "none" };
}
