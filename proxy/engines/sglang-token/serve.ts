/**
 * One harness call in token mode (engine `sglang`): the proxy renders the chat template itself,
 * bridges the prompt ids from the session's earlier turns (so sampled ids are never re-encoded),
 * calls SGLang's native `POST /generate` with `input_ids` and explicit sampling parameters under
 * its own `rid`, parses the sampled text into the assistant message of the harness's API, and
 * records the exact ids with the bridge's verdict (`record.ts`). See docs/token-mode.md.
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
import { postJson, type UpstreamResponse } from "../../upstream";
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
import { type ServedTurn, tokenChoice, tokenCompletion, tokenRecord, turnOrigin } from "./record";
import { turnOutcome } from "./turn";

export { TOKEN_ENGINE_NAME } from "./record";

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

/** Does the prompt end inside an opened think block (`…<think>\n`)? Then the output starts in reasoning. */
function promptOpensThinking(mode: TokenMode, prompt: readonly number[]): boolean {
  return /<think>\s*$/.test(mode.tokenizer.decode(prompt.slice(-4)));
}

type SessionBridge = ReturnType<TokenMode["bridgeFor"]>["bridge"];

/** Partial rollouts of one turn: what earlier tries kept, and where an abort's output goes. */
interface PartialRollout {
  kept: PartialTurn | null;
  onAborted: (p: PartialTurn | null) => void;
}

/** One try of a prepared token-mode call. */
interface TokenTry {
  bridge: SessionBridge;
  prepared: PreparedTurn;
  /** The turn's first `/generate` body (what the record keeps); `generate` is this try's. */
  first: JsonObject;
  generate: JsonObject;
  tools: ToolDefinition[];
  /** Partial rollouts; null: off. */
  partial: PartialRollout | null;
}

/** Where and how the engine answered one try's `/generate`. */
interface EngineAnswer {
  upstream: UpstreamResponse;
  /** The replica that answered. */
  url: string;
  /** The replica's weight version when the try was sent. */
  weightVersionStart: string | null;
  latencyMs: number;
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
  const { bridge, turn } = mode.bridgeFor(call.session);
  const { prepared, request, tools } = prepareTokenTurn(deps, mode, call, bridge, turn);
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

/**
 * Where a call's routed experts start: a turn that continues its chain (its prompt is the parent's
 * prompt + sampled ids + the bridged ids) needs the rows from its parent's last sampled token on
 * (that token's route is computed only now); a turn that starts a chain needs every row.
 */
function routedExpertsStart(prepared: PreparedTurn): number {
  if (prepared.parentTurnId === null) return 0;
  return Math.max(0, prepared.promptIds.length - prepared.bridgedCount - 1);
}

/** Renders and bridges the call's prompt and builds its first `/generate` body (400 on a field it cannot serve). */
function prepareTokenTurn(
  deps: InferenceDeps,
  mode: TokenMode,
  call: InferenceCall,
  bridge: SessionBridge,
  turn: number,
): { prepared: PreparedTurn; request: JsonObject; tools: ToolDefinition[] } {
  const chat = call.parsed.chat;
  const messages = objects(chat.messages) as unknown as ChatMessage[];
  const tools = objects(chat.tools) as unknown as ToolDefinition[];
  const templateKwargs = isObject(chat.chat_template_kwargs) ? chat.chat_template_kwargs : undefined;
  try {
    const sampling = samplingFromRequest(chat);
    const prepared = bridge.prepare({
      messages,
      tools: sglangToolDumps(tools),
      ...(templateKwargs ? { templateKwargs } : {}),
    });
    const imageData = collectImageData(messages);
    const request = buildGenerateRequest({
      inputIds: prepared.promptIds,
      sampling,
      contextLength: mode.contextLength,
      rid: newRid(call.session.sessionId, turn),
      ...(imageData.length > 0 ? { imageData } : {}),
      // Image turns run expanded placeholders: their positions are not the prompt's, so no routes.
      ...(mode.routedExperts && imageData.length === 0
        ? { routedExpertsStart: routedExpertsStart(prepared) }
        : {}),
    });
    // SGLang expands each image placeholder to the image's patch count: keep the ids it ran.
    if (imageData.length > 0) request.return_prompt_token_ids = true;
    applyEnginePriority(request, call.session.meta, deps.priorityOrder ?? null);
    return { prepared, request, tools };
  } catch (err) {
    if (err instanceof SamplingParamError || err instanceof ChatTemplateError) throw badRequest(err);
    throw err;
  }
}

/** One try of a prepared token-mode call: call the engine, settle aborts, commit, reply, record. */
async function sendTokenTurn(
  deps: InferenceDeps,
  mode: TokenMode,
  call: InferenceCall,
  a: Admission,
  turn: TokenTry,
): Promise<CompletionRecord> {
  const rid = String(turn.generate.rid);
  const answer = await callGenerate(deps, call, a, turn.generate, turn.partial !== null);
  const { raw, result: sampled } = readGenerateAnswer(answer.upstream, turn.generate);
  mode.noteOutputIdsPromptTail(answer.url, sampled.outputIdsPromptTail ?? 0);
  deps.replicas.observeWeightVersion(answer.url, sampled.weightVersion);
  const segment = { policy_version: a.policyVersion, weight_version_start: answer.weightVersionStart, rid };
  const result = settleTry(a, turn.partial, sampled, segment);
  const kept = turn.partial?.kept ?? null;
  const served = await commitTurn(deps, mode, turn, result, {
    rid,
    replica: answer.url,
    latencyMs: answer.latencyMs,
    policyVersion: a.policyVersion,
    weightVersionStart: answer.weightVersionStart,
    origin: turnOrigin(kept, a.policyVersion, answer.weightVersionStart),
    raw,
    first: turn.first,
    kept,
  });
  const choice = tokenChoice(mode.tokenizer, served);
  const completion = tokenCompletion(deps.modelServed, served, choice);
  const record = tokenRecord(call, deps.modelServed, served, completion, choice, mode.routedExperts);
  // Families show logprobs only when the harness asked for them.
  replyWhole(call, completion);
  return record;
}

/**
 * Sends one try's `/generate` to a replica of the session (on its DP rank), registering the abort
 * a pause sends; a call nobody will read any more is aborted on the engine before it rethrows.
 */
async function callGenerate(
  deps: InferenceDeps,
  call: InferenceCall,
  a: Admission,
  generate: JsonObject,
  keepsPartial: boolean,
): Promise<EngineAnswer> {
  const sessionId = call.session.sessionId;
  const rid = String(generate.rid);
  const headers = { "content-type": "application/json", [ROUTING_KEY_HEADER]: sessionId };
  const started = performance.now();
  const tried: { url: string | null; weightVersionStart: string | null } = {
    url: null,
    weightVersionStart: null,
  };
  try {
    const got = await withReplica(
      deps,
      sessionId,
      (base) => {
        tried.url = base;
        tried.weightVersionStart = deps.replicas.weightVersion(base);
        // A DP-aware router worker: the session stays on its DP rank (SGLang's `routed_dp_rank`).
        const rank = deps.replicas.dpRank(sessionId, base);
        const body = rank === null ? generate : { ...generate, routed_dp_rank: rank };
        const pending = postJson(`${base}/generate`, body, headers, {
          timeoutMs: deps.timeoutMs,
          signal: a.signal,
        });
        a.ticket.onAbort(async () => {
          await abortRequest(base, rid, sessionId, deps.replicas);
          // Partial rollouts: the engine answers the aborted request with what it sampled so far;
          // wait for that answer before the fence cuts the request (the fence bounds this hook).
          if (keepsPartial) await pending.catch(() => {});
        });
        return pending;
      },
      a.exclude,
      a.signal,
    );
    const latencyMs = performance.now() - started;
    return { upstream: got.value, url: got.url, weightVersionStart: tried.weightVersionStart, latencyMs };
  } catch (err) {
    // Nobody will read this generation: free the engine's slot for calls that still matter (a
    // pause's abort has told the engine already).
    const gone = err instanceof Error && err.name === "AbortError";
    if (tried.url && !a.ticket.aborted && (gone || err instanceof EngineTimeoutError))
      void abortRequest(tried.url, rid, sessionId, deps.replicas);
    throw err;
  }
}

/** The engine's `/generate` answer, parsed; a non-2xx status or a malformed body throws typed. */
function readGenerateAnswer(
  upstream: UpstreamResponse,
  generate: JsonObject,
): { raw: JsonObject; result: GenerateResult } {
  if (upstream.status < 200 || upstream.status >= 300) {
    throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
  }
  const raw = tryParseJson(upstream.body);
  if (!isObject(raw)) throw new EngineContractError("(body)", "is not a JSON object");
  try {
    return { raw, result: parseGenerateResponse(raw, generate.input_ids as number[]) };
  } catch (err) {
    if (err instanceof GenerateResponseError) throw new EngineContractError(err.field, err.message);
    throw err;
  }
}

/**
 * The turn's whole result (the tokens earlier tries kept in front), or the error that ends this
 * try: a pause aborted it (kept for the next try with partial rollouts), or the engine did.
 */
function settleTry(
  a: Admission,
  partial: PartialRollout | null,
  sampled: GenerateResult,
  segment: { policy_version: string | null; weight_version_start: string | null; rid: string },
): GenerateResult {
  if (a.ticket.aborted) {
    // A weight-update pause aborted it. With partial rollouts its sampled tokens are kept for the
    // next try (after resume), and an answer that finished before the abort reached the engine is
    // served as it is; without, the call is issued again from its start.
    if (!partial) throw new Error("aborted by a weight-update pause; issued again after resume");
    if (sampled.finish.type === "abort") {
      partial.onAborted(keepPartial(partial.kept, sampled, segment));
      throw new Error("aborted by a weight-update pause; continued after resume");
    }
  }
  const kept = partial?.kept ?? null;
  const result = kept && sampled.finish.type !== "abort" ? joinPartial(kept, sampled) : sampled;
  if (result.finish.type === "abort") {
    // A weight update or an operator aborted it: a partial turn is no answer; the harness retries.
    throw new ProxyHttpError(
      503,
      "api_error",
      "engine_aborted",
      `the engine aborted the generation${result.finish.message ? `: ${result.finish.message}` : ""}; retry`,
    );
  }
  return result;
}

/**
 * Parses the sampled ids into the harness's assistant message (in SGLang itself when parsing is
 * delegated) and commits the turn to the session's bridge.
 */
async function commitTurn(
  deps: InferenceDeps,
  mode: TokenMode,
  turn: TokenTry,
  result: GenerateResult,
  at: Omit<ServedTurn, "completionId" | "result" | "message" | "finishReason" | "committed">,
): Promise<ServedTurn> {
  const completionId = newCompletionId();
  const startsInReasoning = promptOpensThinking(mode, turn.prepared.promptIds);
  const view = mode.delegated
    ? await delegatedView(deps, at.replica, {
        names: mode.delegated,
        target: deps.replicas.isRouter(at.replica) ? "router" : "engine",
        text: visibleOutputText(mode.tokenizer, result.outputIds, result.finish),
        tools: turn.tools,
        startsInReasoning,
      })
    : undefined;
  const { message, finishReason, outcome } = turnOutcome(mode.tokenizer, result, {
    tools: turn.tools,
    toolCallParser: mode.toolCallParser,
    reasoningParser: mode.reasoningParser,
    startsInReasoning,
    ...(view ? { view } : {}),
    provenance: { completion_id: completionId, ...at.origin, replica: at.replica, rid: at.rid },
  });
  // With images, SGLang runs the sent ids with every image pad expanded by the model's processor
  // (`load_mm_data` + the Qwen-VL processor): the bridge records the engine's ids when they are
  // provably that expansion, else flags the turn `image_prompt_unverified`.
  const imageCount = Array.isArray(turn.generate.image_data) ? turn.generate.image_data.length : 0;
  const committed = turn.bridge.commit(turn.prepared, {
    ...outcome,
    enginePromptIds: result.promptTokenIds,
    imageCount,
  });
  return { ...at, completionId, result, message, finishReason, committed };
}
