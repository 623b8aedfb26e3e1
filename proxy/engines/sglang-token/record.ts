/**
 * What one served token-mode turn answers and keeps: the OpenAI chat completion the harness's
 * family converts, and the {@link CompletionRecord} with the exact ids, the bridge's verdict and
 * the versions each part of the turn was sampled under.
 *
 * Pure: `serve.ts` calls the engine and commits the turn to the bridge.
 *
 * @module
 */
import { base64Bytes, type CompletionRecord, type JsonObject, type RoutedExperts } from "../../../protocol";
import type { BridgedTurn } from "../../../tokenizer/bridge";
import type { ChatMessage, ChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import type { InferenceCall } from "../../call";
import { isObject } from "../../json";
import type { GenerateResult } from "./generate";
import type { PartialTurn } from "./partial";
import type { TurnResult } from "./turn";

/** The engine name token-mode records carry. */
export const TOKEN_ENGINE_NAME = "sglang";

/** The versions a turn is as old as: a continued turn is as old as its first tokens. */
export interface TurnOrigin {
  policy_version: string | null;
  weight_version_start: string | null;
}

/** One served turn: everything its reply and its record are made of. */
export interface ServedTurn {
  completionId: string;
  /** This try's engine request (SGLang `rid`). */
  rid: string;
  /** The replica that answered this try. */
  replica: string;
  latencyMs: number;
  /** The policy version this try was admitted under. */
  policyVersion: string | null;
  /** The replica's weight version when this try was sent. */
  weightVersionStart: string | null;
  origin: TurnOrigin;
  /** The engine's whole answer (its `meta_info` goes into the record). */
  raw: JsonObject;
  /** The turn's result, the tokens kept from aborted tries joined in front. */
  result: GenerateResult;
  /** The turn's first `/generate` body (what the record keeps); later tries only continue it. */
  first: JsonObject;
  /** What aborted tries of the turn sampled; null when none did. */
  kept: PartialTurn | null;
  message: ChatMessage;
  finishReason: TurnResult["finishReason"];
  /** The turn as the bridge committed it. */
  committed: BridgedTurn;
}

/**
 * The versions a turn is as old as: this try's, unless earlier aborted tries sampled its first
 * tokens under older ones.
 *
 * @example
 * ```ts
 * turnOrigin(null, "3", "w3"); // { policy_version: "3", weight_version_start: "w3" }
 * ```
 */
export function turnOrigin(
  kept: PartialTurn | null,
  policyVersion: string | null,
  weightVersionStart: string | null,
): TurnOrigin {
  return {
    policy_version: kept?.segments[0]?.policy_version ?? policyVersion,
    weight_version_start: kept?.segments[0]?.weight_version_start ?? weightVersionStart,
  };
}

/** OpenAI `logprobs.content` for the sampled ids (shown only when the harness asked for logprobs). */
function clientLogprobs(tokenizer: ChatTokenizer, result: GenerateResult): JsonObject {
  return {
    content: result.outputIds.map((id, i) => {
      const token = tokenizer.decode([id]);
      return { token, logprob: result.logprobs[i]!, bytes: [...Buffer.from(token)], top_logprobs: [] };
    }),
  };
}

/**
 * The completion's one choice, with OpenAI logprobs of the sampled ids.
 *
 * @example
 * ```ts
 * const choice = tokenChoice(mode.tokenizer, served); // { index: 0, message, logprobs, finish_reason, … }
 * ```
 */
export function tokenChoice(tokenizer: ChatTokenizer, served: ServedTurn): JsonObject {
  return {
    index: 0,
    message: served.message as unknown as JsonObject,
    logprobs: clientLogprobs(tokenizer, served.result),
    finish_reason: served.finishReason,
    matched_stop: served.result.finish.matched,
  };
}

/**
 * The internal-form chat completion the harness's family answers with.
 *
 * @example
 * ```ts
 * replyWhole(call, tokenCompletion(deps.modelServed, served, choice));
 * ```
 */
export function tokenCompletion(model: string, served: ServedTurn, choice: JsonObject): JsonObject {
  // The prompt the engine ran (SGLang's `meta_info.prompt_tokens` counts the expanded one too).
  const promptTokens = served.committed.prompt_ids.length;
  const sampled = served.result.outputIds.length;
  return {
    id: served.completionId,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [choice],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: sampled,
      total_tokens: promptTokens + sampled,
      prompt_tokens_details: { cached_tokens: served.result.cachedTokens ?? 0 },
    },
  };
}

/**
 * The record of a served turn: exact prompt and sampled ids, logprobs, versions, and the bridge's
 * verdict under `metadata.bridge`.
 *
 * @example
 * ```ts
 * const record = tokenRecord(call, deps.modelServed, served, completion, choice);
 * record.metadata.bridge; // { turn_id, parent_turn_id, verdict, reason, flags, rid, bridged_count }
 * ```
 */
export function tokenRecord(
  call: InferenceCall,
  model: string,
  served: ServedTurn,
  completion: JsonObject,
  choice: JsonObject,
  routeShape: { layers: number; topK: number } | null = null,
): CompletionRecord {
  const { result, committed } = served;
  const { input_ids: _ids, ...generateRest } = served.first;
  const meta = isObject(served.raw.meta_info) ? served.raw.meta_info : {};
  const {
    output_token_logprobs: _o,
    output_token_logprobs_val: _v,
    output_token_logprobs_idx: _x,
    routed_experts: rawRoutes,
    ...metaRest
  } = meta;
  const routes = routeShape ? recordRoutes(served, rawRoutes, routeShape) : null;
  const metadata = recordMetadata(call, served);
  if (routes && "error" in routes) metadata.routed_experts_error = routes.error;
  return {
    completion_id: served.completionId,
    session_id: call.session.sessionId,
    timestamp: new Date().toISOString(),
    api_type: call.family.api,
    engine: TOKEN_ENGINE_NAME,
    model_requested: call.parsed.requestedModel,
    model_used: model,
    original_request: call.original,
    // The internal chat form the prompt was rendered from (builders read messages/tools here) and
    // the /generate body without the ids (they are `prompt_ids`).
    request: { ...call.parsed.chat, model, generate: generateRest },
    response: { ...completion, choices: [{ ...choice, logprobs: null }], meta_info: metaRest },
    prompt_ids: [...committed.prompt_ids],
    response_ids: result.outputIds,
    response_logprobs: result.logprobs,
    finish_reason: served.finishReason,
    weight_version: result.weightVersion,
    weight_version_start: served.origin.weight_version_start,
    policy_version: served.origin.policy_version,
    cached_tokens: result.cachedTokens,
    latency_ms: served.latencyMs,
    replica: served.replica,
    metadata,
    ...(routes && !("error" in routes) ? { routed_experts: routes } : {}),
  };
}

/**
 * The call's routed experts as a typed block, checked against what the call ran: one row per
 * position from the start asked to the last but one (prompt + sampled − 1). A block that does not
 * fit is not kept (a wrong route would train the wrong experts); the record says why.
 */
function recordRoutes(
  served: ServedTurn,
  raw: unknown,
  shape: { layers: number; topK: number },
): RoutedExperts | { error: string } | null {
  const start = served.first.routed_experts_start_len;
  if (typeof start !== "number") return null; // not asked (an image turn)
  if (typeof raw !== "string")
    return {
      error:
        "the engine returned no meta_info.routed_experts (is it running with --enable-return-routed-experts?)",
    };
  const rowBytes = shape.layers * shape.topK * 4;
  const bytes = base64Bytes(raw);
  const want = served.committed.prompt_ids.length + served.result.outputIds.length - 1 - start;
  if (bytes < 0 || bytes % rowBytes !== 0 || bytes / rowBytes !== want)
    return {
      error: `meta_info.routed_experts holds ${bytes} bytes; positions ${start}..${start + want} × ${shape.layers} layers × top-${shape.topK} need ${want * rowBytes}`,
    };
  return { start, rows: want, layers: shape.layers, top_k: shape.topK, data: raw };
}

/** The record's `metadata`: the bridge's verdict, partial-rollout segments and odd prompt ids. */
function recordMetadata(call: InferenceCall, served: ServedTurn): JsonObject {
  const { result, committed, kept, rid } = served;
  return {
    engine_response_id: rid,
    session_meta: call.session.meta,
    policy_version: served.policyVersion,
    path: call.path,
    client_stream: call.parsed.stream,
    engine_stream: false,
    bridge: {
      turn_id: committed.turn_id,
      parent_turn_id: committed.parent_turn_id,
      verdict: committed.verdict,
      reason: committed.reason,
      flags: committed.flags,
      rid,
      bridged_count: committed.bridged_count,
    },
    // A turn continued after a weight update: which sampled tokens came from which weights.
    ...(kept
      ? {
          partial_rollout: {
            segments: [
              ...kept.segments,
              {
                len: result.outputIds.length - kept.ids.length,
                policy_version: served.policyVersion,
                weight_version_start: served.weightVersionStart,
                rid,
                weight_version: result.weightVersion,
              },
            ],
          },
        }
      : {}),
    // The ids sent in `input_ids` when the engine ran others (image pads before expansion).
    ...(committed.sent_prompt_ids ? { sent_prompt_ids: committed.sent_prompt_ids } : {}),
    // The engine's own prompt ids when they could not be recorded as `prompt_ids` (not an
    // expansion of the sent ids), kept for inspection.
    ...(result.promptTokenIds && !sameIds(result.promptTokenIds, committed.prompt_ids)
      ? { engine_prompt_ids: result.promptTokenIds }
      : {}),
  };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
