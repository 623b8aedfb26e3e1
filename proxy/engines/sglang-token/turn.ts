/**
 * The engine-independent middle of one token-mode turn: from a parsed `/generate` result to the
 * assistant message the harness gets and the outcome the bridge records. The proxy's `sglang`
 * engine is this plus HTTP.
 *
 * @module
 */
import type { TurnOutcome, TurnProvenance } from "../../../tokenizer/bridge";
import type { ChatMessage, ChatTokenizer, ToolDefinition } from "../../../tokenizer/chat-tokenizer";
import { type AssistantView, parseAssistantOutput } from "../../../tokenizer/parsers";
import { type GenerateResult, openaiFinishReason, visibleOutputText } from "./generate";

/** Options of {@link turnOutcome}. */
export interface TurnOutcomeOptions {
  tools?: readonly ToolDefinition[];
  toolCallParser?: string | null;
  reasoningParser?: string;
  /** The prompt ended inside a think block (generation prompt `…<think>\n`). */
  startsInReasoning?: boolean;
  makeId?: (index: number) => string;
  provenance?: Partial<TurnProvenance>;
  /** A view parsed elsewhere (SGLang's `/parse_function_call` + `/separate_reasoning`); skips the TS parsers. */
  view?: AssistantView;
}

/** The harness view and the bridge outcome of one turn. */
export interface TurnResult {
  view: AssistantView;
  /** OpenAI assistant message (`reasoning_content` only when there was reasoning). */
  message: ChatMessage;
  finishReason: "stop" | "length" | "tool_calls" | "abort";
  outcome: TurnOutcome;
}

/**
 * Parses the sampled ids into the harness's assistant message and pairs it with the ids and
 * logprobs for {@link TokenBridge.commit}. The ids are passed through untouched; the text is
 * only a view.
 *
 * @example
 * ```ts
 * const result = parseGenerateResponse(json);
 * const { message, finishReason, outcome } = turnOutcome(tok, result, { tools, toolCallParser: "qwen3" });
 * bridge.commit(prepared, outcome);
 * ```
 */
export function turnOutcome(
  tok: ChatTokenizer,
  result: GenerateResult,
  options: TurnOutcomeOptions = {},
): TurnResult {
  const text = visibleOutputText(tok, result.outputIds, result.finish);
  const view =
    options.view ??
    parseAssistantOutput(text, {
      tools: options.tools,
      toolCallParser: options.toolCallParser,
      reasoningParser: options.reasoningParser,
      startsInReasoning: options.startsInReasoning,
      makeId: options.makeId,
    });
  const message: ChatMessage = { role: "assistant", content: view.content };
  if (view.reasoning_content !== null) message.reasoning_content = view.reasoning_content;
  if (view.tool_calls.length > 0) {
    message.tool_calls = view.tool_calls.map((c) => ({
      id: c.id,
      type: c.type,
      function: { ...c.function },
    }));
  }
  const finishReason = openaiFinishReason(result.finish, view.tool_calls.length > 0);
  return {
    view,
    message,
    finishReason,
    outcome: {
      sampledIds: result.outputIds,
      logprobs: result.logprobs,
      assistantMessage: message,
      finishReason,
      provenance: {
        rid: result.rid,
        weight_version: result.weightVersion,
        cached_tokens: result.cachedTokens,
        ...options.provenance,
      },
    },
  };
}
