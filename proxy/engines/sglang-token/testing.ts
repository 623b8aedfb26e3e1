/**
 * Test helpers for token mode: a scripted stand-in for SGLang's `/generate` that answers with ids
 * the test chooses (so a test can force non-canonical splits such as 7640 + 287), run through the
 * real request builder, response parser, output parser and bridge. Used by tests only; it lives
 * beside the token engine it drives, so the tokenizer never imports from the proxy.
 *
 * @module
 */

import type { BridgedTurn, BridgeRequest, PreparedTurn, TokenBridge } from "../../../tokenizer/bridge";
import type { ChatMessage, ChatTokenizer, ToolDefinition } from "../../../tokenizer/chat-tokenizer";
import { buildGenerateRequest, parseGenerateResponse } from "./generate";
import { turnOutcome } from "./turn";

/** A deterministic synthetic logprob for a sampled id at a position. */
export function fakeLogprob(id: number, position: number): number {
  return -(((id * 31 + position * 7) % 997) + 1) / 1000;
}

/** What one scripted turn produced. */
export interface ScriptedTurn {
  prepared: PreparedTurn;
  committed: BridgedTurn;
  message: ChatMessage;
  outputIds: number[];
  logprobs: number[];
}

/**
 * Runs one turn: prepare → `/generate` body → scripted reply → parse → commit. `output` is the
 * sampled ids; the finish is `stop` on the end-of-turn token when the ids end with it, else
 * `length`.
 *
 * @example
 * ```ts
 * const t = scriptedTurn(tok, bridge, { messages }, [...tok.encode("Hi"), 151645]);
 * ```
 */
export function scriptedTurn(
  tok: ChatTokenizer,
  bridge: TokenBridge,
  request: BridgeRequest & { toolDefs?: ToolDefinition[] },
  output: number[],
  options: { toolCallParser?: string; reasoningParser?: string; turn?: number } = {},
): ScriptedTurn {
  const prepared = bridge.prepare(request);
  const body = buildGenerateRequest({
    inputIds: prepared.promptIds,
    sampling: { temperature: 1, max_tokens: 512 },
    contextLength: 40_960,
    rid: `test-${prepared.turnId}`,
  });
  const input = body.input_ids as number[];
  const eot = output.at(-1) === bridge.endOfTurnId;
  const logprobs = output.map(fakeLogprob);
  const reply = {
    text: tok.decode(output),
    output_ids: output,
    meta_info: {
      id: body.rid,
      finish_reason: eot
        ? { type: "stop", matched: bridge.endOfTurnId }
        : { type: "length", length: output.length },
      prompt_tokens: input.length,
      completion_tokens: output.length,
      cached_tokens: 0,
      weight_version: "w1",
      output_token_logprobs: output.map((id, i) => [logprobs[i], id, null]),
    },
  };
  const result = parseGenerateResponse(JSON.parse(JSON.stringify(reply)));
  let n = 0;
  const { message, outcome } = turnOutcome(tok, result, {
    tools: request.toolDefs,
    toolCallParser: options.toolCallParser ?? "qwen3",
    ...(options.reasoningParser ? { reasoningParser: options.reasoningParser } : {}),
    makeId: () => `call_${prepared.turnId}_${n++}`,
    provenance: { policy_version: "p3", replica: "sim-0" },
  });
  const committed = bridge.commit(prepared, outcome);
  return { prepared, committed, message, outputIds: output, logprobs };
}
