/**
 * Per-turn bridge flags: facts about a turn that do not change its verdict, counted per session,
 * per (harness, model) and on the gateway's `polar_bridge_flagged_turns_total`.
 *
 * @module
 */

/**
 * Per-turn flags.
 *
 * @example
 * ```ts
 * BRIDGE_FLAGS.includes("image_prompt_unverified"); // true
 * ```
 *
 * - `reasoning_dropped`: the proxy returned reasoning with the parent turn, and the request echoes
 *   that turn without it (or with other text). The prompt is still bridged from the sampled ids,
 *   so the model sees its own reasoning; a chat server re-rendering the harness's history would not.
 *   See `reasoning.ts`.
 * - `image_prompt_unverified`: the turn sent images, and the engine either returned no prompt ids
 *   (an SGLang that ignores `return_prompt_token_ids`) or returned ids that are not the sent ids
 *   with each image pad expanded to a run. SGLang's multimodal processor re-tokenizes the prompt
 *   and expands every pad to the image's patch count, so the recorded `prompt_ids` (the parent's
 *   recorded ids + sampled ids + this turn's suffix as sent) are not proven to be the sequence the
 *   engine ran: the turn is not token-exact. A turn without images whose engine nonetheless
 *   returned prompt ids other than the sent ones is flagged too. See `engine-prompt.ts`.
 */
export const BRIDGE_FLAGS = ["reasoning_dropped", "image_prompt_unverified"] as const;
export type BridgeFlag = (typeof BRIDGE_FLAGS)[number];

/**
 * Zero counts for every flag.
 *
 * @example
 * ```ts
 * emptyFlagCounts(); // { reasoning_dropped: 0, image_prompt_unverified: 0 }
 * ```
 */
export function emptyFlagCounts(): Record<BridgeFlag, number> {
  return { reasoning_dropped: 0, image_prompt_unverified: 0 };
}
