/**
 * A model continues its own turn: when a prompt ends inside an assistant turn that the model had
 * begun (a client sends back the tokens an aborted request sampled, a partial rollout), a real
 * model goes on from there. The simulator's policy answers a whole prompt, so it finds where the
 * open turn began, answers the prompt up to there, and, when that answer begins with the tokens
 * already in the prompt, samples only the rest. Anything else (an open turn the policy would not
 * have written) is answered as a prompt like any other.
 *
 * @module
 */
import type { ChatTokenizer } from "../tokenizer/chat-tokenizer";

/** Where a prompt's open assistant turn may have begun, latest first. */
export interface OpenTurn {
  /** Candidate lengths of the prompt the turn was first generated from (each ends a generation prompt). */
  starts: number[];
}

/** The markup that opens and ends an assistant turn in one model family's prompts. */
export interface TurnMarkers {
  /** Texts right after which the model writes a turn (the generation prompts of the template). */
  opens: readonly string[];
  /** The special token that ends a turn. */
  end: string;
  /** An empty reasoning block a template's non-thinking generation prompt appends, if any. */
  emptyThink?: string;
}

/** Qwen3's turns: `<|im_start|>assistant\n` … `<|im_end|>`, an empty think block when not thinking. */
export const QWEN3_TURN: TurnMarkers = {
  opens: ["<|im_start|>assistant\n"],
  end: "<|im_end|>",
  emptyThink: "<think>\n\n</think>\n\n",
};

const startsWith = (ids: readonly number[], prefix: readonly number[], at = 0): boolean =>
  prefix.every((id, i) => ids[at + i] === id);

/** The index right after the last occurrence of any of `markers` in `ids`, or -1. */
function afterLastMarker(ids: readonly number[], markers: readonly number[][]): number {
  let best = -1;
  for (const marker of markers) {
    if (marker.length === 0) continue;
    for (let i = ids.length - marker.length; i >= 0; i--) {
      if (startsWith(ids, marker, i)) {
        best = Math.max(best, i + marker.length);
        break;
      }
    }
  }
  return best;
}

/**
 * The open assistant turn at the end of `promptIds`, or null when the prompt ends where a turn
 * begins (the usual generation prompt) or in no assistant turn. The turn opens after the last of
 * the family's turn openers (`turn.opens`); the candidates are right after it and, when an empty
 * think block follows (a template's non-thinking generation prompt), after that block too. A
 * turn-ending token after it means the turn was closed.
 *
 * @example
 * ```ts
 * openAssistantTurn(tok, tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel"));
 * // { starts: [14] } (the index right after "assistant\n")
 * ```
 */
export function openAssistantTurn(
  tok: ChatTokenizer,
  promptIds: readonly number[],
  turn: TurnMarkers = QWEN3_TURN,
): OpenTurn | null {
  const end = tok.tokenId(turn.end);
  if (end === undefined) return null;
  const at = afterLastMarker(
    promptIds,
    turn.opens.map((text) => tok.encode(text)),
  );
  if (at < 0 || at >= promptIds.length) return null;
  for (let i = at; i < promptIds.length; i++) if (promptIds[i] === end) return null;
  const starts = [at];
  const emptyThink = turn.emptyThink === undefined ? [] : tok.encode(turn.emptyThink);
  if (
    emptyThink.length > 0 &&
    startsWith(promptIds, emptyThink, at) &&
    at + emptyThink.length < promptIds.length
  )
    starts.unshift(at + emptyThink.length);
  return { starts };
}

/**
 * The ids still to sample when `answer` (the policy's whole answer to the prompt up to `start`)
 * begins with what the prompt already holds after `start`; null when it does not.
 *
 * @example
 * ```ts
 * remainingAnswer([1, 2, 3, 4], [9, 9, 1, 2], 2); // [3, 4]
 * ```
 */
export function remainingAnswer(
  answer: readonly number[],
  promptIds: readonly number[],
  start: number,
): number[] | null {
  const kept = promptIds.slice(start);
  if (kept.length === 0 || kept.length > answer.length || !startsWith(answer, kept)) return null;
  return answer.slice(kept.length);
}
