/**
 * One harness call in token mode (engine `sglang`): the proxy renders the chat template itself,
 * bridges the prompt ids from the session's earlier turns (so sampled ids are never re-encoded),
 * calls SGLang's native `POST /generate` with `input_ids` and explicit sampling parameters under
 * its own `rid`, parses the sampled text into the assistant message of the harness's API, and
 * records the exact ids with the bridge's verdict. See docs/token-mode.md.
 *
 * @module
 */
import { performance } from "node:perf_hooks";
import type { CompletionRecord, JsonObject } from "../../../protocol";
import type { PreparedTurn } from "../../../tokenizer/bridge";
import {
  type ChatMessage,
  ChatTemplateError,
  sglangToolDumps,
  type ToolDefinition,
} from "../../../tokenizer/chat-tokenizer";
import { tryParseJson } from "../../../tokenizer/parsers";
import { type Admission, abortRequest } from "../../admission";
import { type InferenceCall, type InferenceDeps, replyWhole, withReplica } from "../../call";
import { newCompletionId } from "../../capture";
import { applyEnginePriority } from "../../engine-priority";
import { EngineContractError, EngineStatusError, EngineTimeoutError, ProxyHttpError } from "../../errors";
import { isObject, objects } from "../../json";
import { postJson } from "../../upstream";
import { ROUTING_KEY_HEADER } from "../sglang-openai";
import { delegatedView } from "./delegate";
import {
  buildGenerateRequest,
  collectImageData,
  GenerateResponseError,
  type GenerateResult,
  newRid,
  parseGenerateResponse,
  SamplingParamError,
  samplingFromRequest,
  visibleOutputText,
} from "./generate";
import type { TokenMode } from "./mode";
import { continuable, continuationRequest, joinPartial, keepPartial, type PartialTurn } from "./partial";
import { turnOutcome } from "./turn";

/** The engine name token-mode records carry. */
export const TOKEN_ENGINE_NAME = "sglang";

/** A harness field the token mode cannot serve → 400 naming it (context overflow as OpenAI names it). */
function badRequest(err: SamplingParamError | ChatTemplateError): ProxyHttpError {
  if (err instanceof SamplingParamError && err.field === "messages") {
    // LiteLLM-based agents only compact their history when they see this code.
    return new ProxyHttpError(
      400,
      "invalid_request_error",
      "context_length_exceeded",
      `This model's maximum context length was exceeded: ${err.message}`,
      "messages",
    );
  }
  const field = err instanceof SamplingParamError ? err.field : (err.field ?? "messages");
  const message = err.message.startsWith(`${field}:`) ? err.message : `${field}: ${err.message}`;
  return new ProxyHttpError(400, "invalid_request_error", "invalid_request", message, field);
}

/** OpenAI `logprobs.content` for the sampled ids (shown only when the harness asked for logprobs). */
function clientLogprobs(mode: TokenMode, result: GenerateResult): JsonObject {
  return {
    content: result.outputIds.map((id, i) => {
      const token = mode.tokenizer.decode([id]);
      return { token, logprob: result.logprobs[i]!, bytes: [...Buffer.from(token)], top_logprobs: [] };
    }),
  };
}

/** Does the prompt end inside an opened think block (`…<think>\n`)? Then the output starts in reasoning. */
function promptOpensThinking(mode: TokenMode, prompt: readonly number[]): boolean {
  return /<think>\s*$/.test(mode.tokenizer.decode(prompt.slice(-4)));
}

/**
 * Prepares one call in token mode (renders and bridges its prompt; a field the token mode cannot
 * serve throws a 400 here, before any admission) and returns the function that serves it once
 * admitted — possibly more than once, when a pause in `abort` mode aborted an earlier try; each
 * try sends the same prompt under a fresh `rid`. Serving throws typed errors before anything was
 * written to the harness, and aborts the engine request (`POST /abort_request {rid}`) when the
 * harness hangs up, the call times out, or a pause aborts it.
 *
 * @example
 * ```ts
 * const serve = serveTokenTurn(deps, deps.tokenMode!, call);
 * const record = await admitted(deps, call.session.meta, call.res, clientGone.signal, serve);
 * ```
 */
export function serveTokenTurn(
  deps: InferenceDeps,
  mode: TokenMode,
  call: InferenceCall,
): (a: Admission) => Promise<CompletionRecord> {
  const chat = call.parsed.chat;
  const messages = objects(chat.messages) as unknown as ChatMessage[];
  const tools = objects(chat.tools) as unknown as ToolDefinition[];
  const templateKwargs = isObject(chat.chat_template_kwargs) ? chat.chat_template_kwargs : undefined;
  const { bridge, turn } = mode.bridgeFor(call.session);
  let prepared: PreparedTurn;
  let request: JsonObject;
  try {
    const sampling = samplingFromRequest(chat);
    prepared = bridge.prepare({
      messages,
      tools: sglangToolDumps(tools),
      ...(templateKwargs ? { templateKwargs } : {}),
    });
    const imageData = collectImageData(messages);
    request = buildGenerateRequest({
      inputIds: prepared.promptIds,
      sampling,
      contextLength: mode.contextLength,
      rid: newRid(call.session.sessionId, turn),
      ...(imageData.length > 0 ? { imageData } : {}),
    });
    // SGLang expands each image placeholder to the image's patch count: keep the ids it ran.
    if (imageData.length > 0) request.return_prompt_token_ids = true;
    applyEnginePriority(request, call.session.meta, deps.priorityOrder ?? null);
  } catch (err) {
    if (err instanceof SamplingParamError || err instanceof ChatTemplateError) throw badRequest(err);
    throw err;
  }
  let tries = 0;
  // What aborted tries sampled, continued by the next try (partial rollouts, `partial.ts`).
  let partial: PartialTurn | null = null;
  const keep = deps.partialRollouts !== false && continuable(request);
  return (a) => {
    // A re-issued call is a new request: SGLang refuses a rid that is still known.
    const rid = tries++ === 0 ? String(request.rid) : newRid(call.session.sessionId, turn);
    const generate = partial
      ? continuationRequest(request, prepared.promptIds, partial, rid)
      : { ...request, rid };
    return sendTokenTurn(deps, mode, call, a, {
      bridge,
      prepared,
      first: request,
      generate,
      tools,
      partial: keep ? { kept: partial, onAborted: (p) => (partial = p) } : null,
    });
  };
}

/** One try of a prepared token-mode call. */
async function sendTokenTurn(
  deps: InferenceDeps,
  mode: TokenMode,
  call: InferenceCall,
  a: Admission,
  turnIn: {
    bridge: ReturnType<TokenMode["bridgeFor"]>["bridge"];
    prepared: PreparedTurn;
    /** The turn's first `/generate` body (what the record keeps); `generate` is this try's. */
    first: JsonObject;
    generate: JsonObject;
    tools: ToolDefinition[];
    /** Partial rollouts: what earlier tries kept, and where an abort's output goes; null: off. */
    partial: { kept: PartialTurn | null; onAborted: (p: PartialTurn | null) => void } | null;
  },
): Promise<CompletionRecord> {
  const { bridge, prepared, first, generate, tools, partial } = turnIn;
  const chat = call.parsed.chat;
  const policyVersion = a.policyVersion;
  const rid = String(generate.rid);
  const headers = { "content-type": "application/json", [ROUTING_KEY_HEADER]: call.session.sessionId };
  const started = performance.now();
  const tried: { url: string | null } = { url: null };
  let weightVersionStart: string | null = null;
  let upstream: Awaited<ReturnType<typeof postJson>>;
  let url: string;
  try {
    const got = await withReplica(
      deps,
      call.session.sessionId,
      (base) => {
        tried.url = base;
        weightVersionStart = deps.replicas.weightVersion(base);
        // A DP-aware router worker: the session stays on its DP rank (SGLang's `routed_dp_rank`).
        const rank = deps.replicas.dpRank(call.session.sessionId, base);
        const body = rank === null ? generate : { ...generate, routed_dp_rank: rank };
        const pending = postJson(`${base}/generate`, body, headers, {
          timeoutMs: deps.timeoutMs,
          signal: a.signal,
        });
        a.ticket.onAbort(async () => {
          await abortRequest(base, rid, call.session.sessionId, deps.replicas);
          // Partial rollouts: the engine answers the aborted request with what it sampled so far;
          // wait for that answer before the fence cuts the request (the fence bounds this hook).
          if (partial) await pending.catch(() => {});
        });
        return pending;
      },
      a.exclude,
      a.signal,
    );
    upstream = got.value;
    url = got.url;
  } catch (err) {
    // Nobody will read this generation: free the engine's slot for calls that still matter (a
    // pause's abort has told the engine already).
    const gone = err instanceof Error && err.name === "AbortError";
    if (tried.url && !a.ticket.aborted && (gone || err instanceof EngineTimeoutError))
      void abortRequest(tried.url, rid, call.session.sessionId, deps.replicas);
    throw err;
  }
  const latency_ms = performance.now() - started;
  if (upstream.status < 200 || upstream.status >= 300) {
    throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
  }
  const raw = tryParseJson(upstream.body);
  if (!isObject(raw)) throw new EngineContractError("(body)", "is not a JSON object");
  let result: GenerateResult;
  try {
    result = parseGenerateResponse(raw, generate.input_ids as number[]);
  } catch (err) {
    if (err instanceof GenerateResponseError) throw new EngineContractError(err.field, err.message);
    throw err;
  }
  mode.noteOutputIdsPromptTail(url, result.outputIdsPromptTail ?? 0);
  deps.replicas.observeWeightVersion(url, result.weightVersion);
  const segment = { policy_version: policyVersion, weight_version_start: weightVersionStart, rid };
  if (a.ticket.aborted) {
    // A weight-update pause aborted it. With partial rollouts its sampled tokens are kept for the
    // next try (after resume), and an answer that finished before the abort reached the engine is
    // served as it is; without, the call is issued again from its start.
    if (!partial) throw new Error("aborted by a weight-update pause; issued again after resume");
    if (result.finish.type === "abort") {
      partial.onAborted(keepPartial(partial.kept, result, segment));
      throw new Error("aborted by a weight-update pause; continued after resume");
    }
  }
  const kept = partial?.kept ?? null;
  if (kept && result.finish.type !== "abort") result = joinPartial(kept, result);
  if (result.finish.type === "abort") {
    // A weight update or an operator aborted it: a partial turn is no answer; the harness retries.
    throw new ProxyHttpError(
      503,
      "api_error",
      "engine_aborted",
      `the engine aborted the generation${result.finish.message ? `: ${result.finish.message}` : ""}; retry`,
    );
  }
  const completionId = newCompletionId();
  const startsInReasoning = promptOpensThinking(mode, prepared.promptIds);
  const view = mode.delegated
    ? await delegatedView(deps, url, {
        names: mode.delegated,
        target: deps.replicas.isRouter(url) ? "router" : "engine",
        text: visibleOutputText(mode.tokenizer, result.outputIds, result.finish),
        tools,
        startsInReasoning,
      })
    : undefined;
  const { message, finishReason, outcome } = turnOutcome(mode.tokenizer, result, {
    tools,
    toolCallParser: mode.toolCallParser,
    reasoningParser: mode.reasoningParser,
    startsInReasoning,
    ...(view ? { view } : {}),
    provenance: {
      completion_id: completionId,
      // A continued turn is as old as its first tokens.
      policy_version: kept?.segments[0]?.policy_version ?? policyVersion,
      weight_version_start: kept?.segments[0]?.weight_version_start ?? weightVersionStart,
      replica: url,
      rid,
    },
  });
  // With images, SGLang runs the sent ids with every image pad expanded by the model's processor
  // (`load_mm_data` + the Qwen-VL processor): the bridge records the engine's ids when they are
  // provably that expansion, else flags the turn `image_prompt_unverified`.
  const imageCount = Array.isArray(generate.image_data) ? generate.image_data.length : 0;
  const committed = bridge.commit(prepared, {
    ...outcome,
    enginePromptIds: result.promptTokenIds,
    imageCount,
  });

  // The prompt the engine ran (SGLang's `meta_info.prompt_tokens` counts the expanded one too).
  const promptTokens = committed.prompt_ids.length;
  const cached = result.cachedTokens ?? 0;
  const choice: JsonObject = {
    index: 0,
    message: message as unknown as JsonObject,
    logprobs: clientLogprobs(mode, result),
    finish_reason: finishReason,
    matched_stop: result.finish.matched,
  };
  const completion: JsonObject = {
    id: completionId,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: deps.modelServed,
    choices: [choice],
    usage: {
      prompt_tokens: promptTokens,
      completion_tokens: result.outputIds.length,
      total_tokens: promptTokens + result.outputIds.length,
      prompt_tokens_details: { cached_tokens: cached },
    },
  };
  const { input_ids: _ids, ...generateRest } = first;
  const meta = isObject(raw.meta_info) ? raw.meta_info : {};
  const {
    output_token_logprobs: _o,
    output_token_logprobs_val: _v,
    output_token_logprobs_idx: _x,
    ...metaRest
  } = meta;
  const record: CompletionRecord = {
    completion_id: completionId,
    session_id: call.session.sessionId,
    timestamp: new Date().toISOString(),
    api_type: call.family.api,
    engine: TOKEN_ENGINE_NAME,
    model_requested: call.parsed.requestedModel,
    model_used: deps.modelServed,
    original_request: call.original,
    // The internal chat form the prompt was rendered from (builders read messages/tools here) and
    // the /generate body without the ids (they are `prompt_ids`).
    request: { ...chat, model: deps.modelServed, generate: generateRest },
    response: { ...completion, choices: [{ ...choice, logprobs: null }], meta_info: metaRest },
    prompt_ids: [...committed.prompt_ids],
    response_ids: result.outputIds,
    response_logprobs: result.logprobs,
    finish_reason: finishReason,
    weight_version: result.weightVersion,
    weight_version_start: kept?.segments[0]?.weight_version_start ?? weightVersionStart,
    policy_version: kept?.segments[0]?.policy_version ?? policyVersion,
    cached_tokens: result.cachedTokens,
    latency_ms,
    replica: url,
    metadata: {
      engine_response_id: rid,
      session_meta: call.session.meta,
      policy_version: policyVersion,
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
                  ...segment,
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
    },
  };
  // Families show logprobs only when the harness asked for them.
  replyWhole(call, completion);
  return record;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
