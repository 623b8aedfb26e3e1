/**
 * The prompt the engine ran against the prompt the proxy sent. With `image_data`, SGLang decodes
 * `input_ids`, splits the text on the model's image placeholder and lets the model's processor
 * re-tokenize it, expanding each image pad to the image's patch count
 * (`base_processor.load_mm_data`, the Qwen-VL processor's `process_mm_data_async`; read on SGLang
 * main as of 2026-11): the sequence it runs is the sent one with every `<|image_pad|>` grown into a
 * run. This module checks that alignment token by token, so a turn records the engine's ids only
 * when they are provably that expansion.
 *
 * @module
 */

/** How the engine's prompt ids relate to the sent ones. */
export type EnginePromptMatch =
  /** The engine ran exactly the sent ids. */
  | { kind: "same" }
  /** The sent ids with the i-th image pad expanded to `runs[i]` pads. */
  | { kind: "expanded"; runs: number[] }
  /** Anything else; `reason` says where the two part. */
  | { kind: "mismatch"; reason: string };

/**
 * Compares the engine's prompt ids with the sent ids: equal, an image-pad expansion (each sent
 * pad → a run of one or more pads, every other id unchanged), or neither. Two adjacent sent pads
 * are a mismatch: their runs could not be told apart.
 *
 * @example
 * ```ts
 * matchEnginePrompt([1, 9, 2], [1, 9, 9, 9, 2], 9); // { kind: "expanded", runs: [3] }
 * matchEnginePrompt([1, 2], [1, 3], 9);             // { kind: "mismatch", reason: "…position 1…" }
 * ```
 */
export function matchEnginePrompt(
  sent: readonly number[],
  engine: readonly number[],
  padId: number | undefined,
): EnginePromptMatch {
  const runs: number[] = [];
  let j = 0;
  for (let i = 0; i < sent.length; i++) {
    const id = sent[i]!;
    if (padId !== undefined && id === padId) {
      if (sent[i + 1] === padId)
        return {
          kind: "mismatch",
          reason: `sent ids hold adjacent image pads at ${i} (ambiguous expansion)`,
        };
      let run = 0;
      while (engine[j + run] === padId) run++;
      if (run === 0)
        return {
          kind: "mismatch",
          reason: `the engine's prompt has no image pad at ${j} (sent position ${i})`,
        };
      runs.push(run);
      j += run;
      continue;
    }
    if (engine[j] !== id) {
      return {
        kind: "mismatch",
        reason: `the engine's prompt has ${engine[j] ?? "nothing"} at ${j} where ${id} was sent (sent position ${i})`,
      };
    }
    j++;
  }
  if (j !== engine.length)
    return {
      kind: "mismatch",
      reason: `the engine's prompt is ${engine.length - j} ids longer than the expansion`,
    };
  return runs.every((r) => r === 1) ? { kind: "same" } : { kind: "expanded", runs };
}
