/**
 * The token-mode flags that `polar proxy` and `polar serve_gateway` share: both start the same
 * proxy, so a flag added here reaches both commands with one spelling and one help text. Kept free
 * of heavy imports: `cli/main.ts` loads it for every command line it parses.
 *
 * @module
 */
import type { Command } from "commander";

/** The token-mode flags as commander parses them (each command's options extend this). */
export interface TokenModeFlags {
  /** Token mode: a model family Polar-TS knows (its tokenizer, template and parsers by default). */
  modelFamily?: string;
  /** Token mode: a chat template file used instead of the folder's (SGLang's `--chat-template`). */
  chatTemplate?: string;
  /** Tokenizer + chat template folder (token mode; chat engines use it for `count_tokens`). */
  tokenizerPath?: string;
  /** Token mode (`--engine sglang`): tool-call parser name (the engine's own for a format Polar-TS does not parse). */
  toolCallParser?: string;
  /** Token mode: reasoning parser name. */
  reasoningParser?: string;
  /** Token mode: the model's context window in tokens (commander gives a string or a number). */
  contextLength?: number | string;
  /** Token mode: parse with SGLang's `/separate_reasoning` and `/parse_function_call`. */
  delegateParsing?: boolean;
  /** Token mode: `bridge` or `new_chain` when the template rewrites history. */
  onTemplateMismatch?: string;
  /** Token mode: record routed experts, `LAYERS:TOP_K` of the MoE model (MoE routing replay). */
  routedExperts?: string;
}

/**
 * `--routed-experts LAYERS:TOP_K` as token mode's `routedExperts`; throws an Error whose message
 * starts with the flag when the value is not two integers >= 1.
 *
 * @example
 * ```ts
 * parseRoutedExperts("48:8"); // { layers: 48, topK: 8 }
 * ```
 */
export function parseRoutedExperts(
  value: string,
  flag = "--routed-experts",
): { layers: number; topK: number } {
  const m = /^(\d+):(\d+)$/.exec(value.trim());
  const layers = Number(m?.[1]);
  const topK = Number(m?.[2]);
  if (!m || layers < 1 || topK < 1)
    throw new Error(
      `${flag}: '${value}' is not LAYERS:TOP_K (the model's num_hidden_layers and num_experts_per_tok, e.g. 48:8)`,
    );
  return { layers, topK };
}

/**
 * Adds the token-mode flags to `command`, in the order its help lists them.
 *
 * @param tokenizerHelp what `--tokenizer-path` means for this command (its default differs).
 * @example
 * ```ts
 * withTokenModeFlags(program.command("proxy"), "tokenizer + chat template folder").option("--port <n>", "port");
 * ```
 */
export function withTokenModeFlags(command: Command, tokenizerHelp: string): Command {
  return command
    .option(
      "--model-family <name>",
      "token mode: qwen3 | deepseek_v3 (tokenizer, template and parsers; default: recognised from the template of --tokenizer-path, else qwen3)",
    )
    .option("--tokenizer-path <dir>", tokenizerHelp)
    .option("--chat-template <file>", "token mode: a chat template used instead of the tokenizer folder's")
    .option(
      "--tool-call-parser <name>",
      "token mode: qwen3 | qwen25 | hermes | qwen3_coder | deepseekv3, or the engine's name for a format Polar-TS does not parse",
    )
    .option("--reasoning-parser <name>", "token mode: qwen3 | qwen3-thinking | deepseek-r1 | none")
    .option("--context-length <n>", "token mode: model context window (default 40960)")
    .option(
      "--delegate-parsing",
      "token mode: parse with SGLang's /separate_reasoning and /parse_function_call",
    )
    .option("--on-template-mismatch <mode>", "token mode: bridge | new_chain")
    .option(
      "--routed-experts <layers:top_k>",
      "token mode: record the experts the engine's MoE router picked per token (the model's num_hidden_layers:num_experts_per_tok; the engine runs with --enable-return-routed-experts)",
    );
}
