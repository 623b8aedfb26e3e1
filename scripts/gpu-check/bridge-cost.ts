/**
 * The token bridge's per-turn cost at the served model's vocabulary: a synthetic tool-using
 * session grown to a target history length with the model's own tokenizer and chat template
 * (`--tokenizer-path`), timing `prepare` + `commit` of each turn. No engine is called: the sampled
 * ids are the encoding of scripted replies, which is all the bridge sees of an engine.
 *
 * @module
 */
import { TokenBridge } from "../../tokenizer/bridge";
import type { ChatMessage, ChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { median } from "./http";

/** One measured history size. */
export interface BridgeCost {
  /** Prompt tokens of the last timed turn. */
  historyTokens: number;
  /** Median `prepare` + `commit` time per turn near that size (ms). */
  perTurnMs: number;
  turns: number;
}

const FILLER =
  "The function reads the configuration, checks every field, and returns the parsed value; errors name the field. ";

/**
 * Grows one session until its prompt passes each of `targets` (tokens) and times the turns near
 * each target.
 *
 * @example
 * ```ts
 * const costs = measureBridgeCost(tok, [8_000, 32_000]);
 * costs[1]!.perTurnMs; // e.g. 0.6
 * ```
 */
export function measureBridgeCost(tok: ChatTokenizer, targets: readonly number[]): BridgeCost[] {
  const bridge = new TokenBridge(tok, { harness: "gpu-check" });
  const eot = bridge.endOfTurnId;
  const messages: ChatMessage[] = [{ role: "user", content: "Fix the failing test in the repository." }];
  const out: BridgeCost[] = [];
  let window: number[] = [];
  let turn = 0;
  for (const target of [...targets].sort((a, b) => a - b)) {
    for (;;) {
      const started = performance.now();
      const prepared = bridge.prepare({ messages });
      const text = `Step ${turn}: I read the next file.`;
      const sampled = [...tok.encode(text), eot];
      const assistant: ChatMessage = { role: "assistant", content: text };
      bridge.commit(prepared, {
        sampledIds: sampled,
        logprobs: sampled.map(() => -0.1),
        assistantMessage: assistant,
        finishReason: "stop",
      });
      window.push(performance.now() - started);
      if (window.length > 5) window = window.slice(-5);
      turn++;
      messages.push(assistant, { role: "user", content: FILLER.repeat(20) });
      if (prepared.promptIds.length >= target) {
        out.push({ historyTokens: prepared.promptIds.length, perTurnMs: median(window), turns: turn });
        break;
      }
    }
  }
  return out;
}
