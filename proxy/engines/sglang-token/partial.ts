/**
 * Partial rollouts in token mode: a turn a weight-update fence aborts in `abort` mode keeps the
 * tokens the engine had sampled (SGLang answers an aborted `/generate` with `finish_reason.type
 * "abort"` and the output so far, ids and logprobs), and after resume the proxy asks only for the
 * rest: the prompt followed by those ids as `input_ids`, `max_new_tokens` less what was sampled.
 * The turn the harness gets, and the record, are the concatenation; each part keeps the versions
 * it was sampled under (`metadata.partial_rollout.segments`), so a trainer sees which tokens came
 * from which weights. The decoding of the first part is not thrown away, which is what makes the
 * abort fence cheaper than re-issuing the call from its start (docs/token-mode.md, "Partial
 * rollouts"; slime's and AReaL's partial rollouts do the same with their own engines).
 *
 * Pure: the HTTP is in `serve.ts`.
 *
 * @module
 */
import type { JsonObject } from "../../../protocol";
import type { GenerateResult } from "./generate";

/** One stretch of a turn's sampled tokens, sampled under one set of weights. */
export interface VersionSegment {
  /** Sampled tokens in this stretch. */
  len: number;
  /** The fence's policy version the stretch was admitted under. */
  policy_version: string | null;
  /** The replica's weight version when the stretch started, and as the engine reported it at its end. */
  weight_version_start: string | null;
  weight_version: string | null;
  /** The engine request that sampled it (SGLang `rid`). */
  rid: string;
}

/** What earlier, aborted tries of one turn sampled. */
export interface PartialTurn {
  ids: number[];
  logprobs: number[];
  segments: VersionSegment[];
}

/**
 * The tokens an aborted try sampled, added to what earlier tries of the same turn sampled; null
 * when there is nothing to keep (no token came back).
 *
 * @example
 * ```ts
 * let partial = keepPartial(null, abortedResult, { policy_version: "3", weight_version_start: "3", rid: "s-t1-aa" });
 * ```
 */
export function keepPartial(
  earlier: PartialTurn | null,
  aborted: GenerateResult,
  part: Omit<VersionSegment, "len" | "weight_version">,
): PartialTurn | null {
  if (aborted.outputIds.length === 0) return earlier;
  const segment: VersionSegment = {
    len: aborted.outputIds.length,
    ...part,
    weight_version: aborted.weightVersion,
  };
  return {
    ids: [...(earlier?.ids ?? []), ...aborted.outputIds],
    logprobs: [...(earlier?.logprobs ?? []), ...aborted.logprobs],
    segments: [...(earlier?.segments ?? []), segment],
  };
}

/**
 * The `/generate` body that continues a turn after `partial`: the prompt and the kept ids as
 * `input_ids`, `max_new_tokens` less the kept tokens (at least 1: a turn aborted on its last
 * token asks for one more, which the engine's length check ends at once), everything else as
 * first sent. `rid` is the new try's.
 *
 * @example
 * ```ts
 * continuationRequest(first, promptIds, partial, "s-t1-bb").input_ids; // [...promptIds, ...partial.ids]
 * ```
 */
export function continuationRequest(
  first: JsonObject,
  promptIds: readonly number[],
  partial: PartialTurn,
  rid: string,
): JsonObject {
  const sampling = (first.sampling_params ?? {}) as JsonObject;
  const max = typeof sampling.max_new_tokens === "number" ? sampling.max_new_tokens : 1;
  return {
    ...first,
    rid,
    input_ids: [...promptIds, ...partial.ids],
    sampling_params: { ...sampling, max_new_tokens: Math.max(1, max - partial.ids.length) },
  };
}

/**
 * Whether a turn can be continued after an abort: not with images (SGLang expands image pads in
 * `input_ids` and would have to be sent the expanded prompt back; such a turn is issued again
 * from its start, as before partial rollouts).
 *
 * @example
 * ```ts
 * continuable({ input_ids: [1, 2] }); // true
 * continuable({ input_ids: [1, 2], image_data: ["data:…"] }); // false
 * ```
 */
export function continuable(request: JsonObject): boolean {
  return !(Array.isArray(request.image_data) && request.image_data.length > 0);
}

/**
 * The whole turn: the kept tokens followed by the continuation's, whose finish, weight version
 * and cache figures are the turn's.
 *
 * @example
 * ```ts
 * const whole = joinPartial(partial, continuation); // whole.outputIds = [...partial.ids, ...continuation.outputIds]
 * ```
 */
export function joinPartial(partial: PartialTurn, rest: GenerateResult): GenerateResult {
  return {
    ...rest,
    outputIds: [...partial.ids, ...rest.outputIds],
    logprobs: [...partial.logprobs, ...rest.logprobs],
    completionTokens: partial.ids.length + rest.outputIds.length,
    // The prompt sent to the continuation ends with the kept ids: the turn's prompt is the first.
    promptTokenIds: null,
  };
}
