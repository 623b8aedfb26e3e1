/**
 * Prompt dialects of the simulated engine: the scripted policies read ChatML prompts and answer in
 * Qwen3's output format; a dialect translates another model family's prompt into that form and the
 * answer back into what that family samples.
 *
 * @module
 */
import type { ModelFamily } from "../../tokenizer/families";
import type { TurnMarkers } from "../continuation";
import {
  chatmlAnswerAsDeepseek,
  DEEPSEEK_V3_TURN,
  deepseekChatToolCalls,
  deepseekPromptAsChatml,
} from "./deepseek-v3";

export {
  chatmlAnswerAsDeepseek,
  DEEPSEEK_V3_TURN,
  deepseekChatToolCalls,
  deepseekPromptAsChatml,
} from "./deepseek-v3";

/** How the sim's policies read one family's prompts and write its answers. */
export interface PromptDialect {
  /** The family's rendered prompt as the ChatML prompt of the same conversation. */
  readPrompt(prompt: string): string;
  /** A Qwen3-format answer as the family samples it (without its end-of-turn token). */
  writeAnswer(answer: string): string;
  /** Where the family's assistant turns open and end (a prompt that ends inside one is continued). */
  turn: TurnMarkers;
  /** The chat endpoint's tool-call parser for the family (the server's `--tool-call-parser`). */
  chatToolCalls(text: string, toolNames: readonly string[]): { normal: string; calls: ChatToolCall[] };
}

/** One tool call the chat endpoint returns: `arguments` is a JSON string. */
export interface ChatToolCall {
  name: string;
  arguments: string;
}

/**
 * The dialect the sim needs for `family`, or null when the policies read its prompts as they are
 * (Qwen3).
 *
 * @example
 * ```ts
 * dialectFor(modelFamily("deepseek_v3"))?.readPrompt("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
 * // "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
 * ```
 */
export function dialectFor(family: ModelFamily): PromptDialect | null {
  switch (family.name) {
    case "qwen3":
      return null;
    case "deepseek_v3":
      return {
        readPrompt: deepseekPromptAsChatml,
        writeAnswer: chatmlAnswerAsDeepseek,
        turn: { opens: [...DEEPSEEK_V3_TURN.opens], end: DEEPSEEK_V3_TURN.end },
        chatToolCalls: deepseekChatToolCalls,
      };
  }
}
