/**
 * One harness call, end to end: family transform → fence → replica → engine → record → native
 * reply (JSON, synthesised stream, or real stream when the engine streams with token ids).
 *
 * @module
 */
import type http from "node:http";
import { performance } from "node:perf_hooks";
import type { CompletionRecord, JsonObject } from "../protocol";
import { type Admission, abortRequest, admitted } from "./admission";
import { headersOf, type InferenceCall, type InferenceDeps, replyWhole, withReplica } from "./call";
import { newCompletionId } from "./capture";
import { applyEnginePriority, enginePriorityValue, sessionEnginePriority } from "./engine-priority";
import { type EngineAdapter, VllmStreamAccumulator } from "./engines";
import { validateChatRequest } from "./engines/sglang-openai";
import { newRid } from "./engines/sglang-token/generate";
import { serveTokenTurn } from "./engines/sglang-token/serve";
import {
  classifyError,
  EngineContractError,
  EngineStatusError,
  engineFailureOf,
  PolicyVersionGapError,
  ProxyHttpError,
} from "./errors";
import { openAiChat } from "./families";
import type { Family } from "./families/types";
import { isObject, randomId } from "./json";
import { applySamplingPolicy, sessionSamplingPolicy } from "./sampling";
import { postJson, postStream } from "./upstream";

/**
 * Writes an error in the family's native shape. OpenAI Chat harnesses get the engine's own error
 * body unchanged (it is already OpenAI-shaped); the other families get it wrapped in theirs.
 *
 * @example
 * ```ts
 * sendFamilyError(res, anthropic, new ProxyHttpError(401, "invalid_request_error", "invalid_api_key", "…"));
 * ```
 */
export function sendFamilyError(res: http.ServerResponse, family: Family, err: unknown): void {
  const e = classifyError(err);
  if (res.headersSent) {
    res.end(
      family
        .stream({ chat: {}, stream: true, requestedModel: null, reply: {} }, { id: "error", created: 0 })
        .error(e),
    );
    return;
  }
  if (e.passthrough && family === openAiChat) {
    res
      .writeHead(e.passthrough.status, { "content-type": e.passthrough.contentType })
      .end(e.passthrough.body);
    return;
  }
  res.writeHead(e.status, { "content-type": "application/json" }).end(JSON.stringify(family.errorBody(e)));
}

/**
 * Serves one admitted call. The session slot is reserved and the fence entered here; both are
 * released whatever happens. Throws typed errors only before anything was written to the harness.
 *
 * @example
 * ```ts
 * await serveCall(deps, { family, session, original, parsed, path, res });
 * ```
 */
export async function serveCall(deps: InferenceDeps, call: InferenceCall): Promise<void> {
  // The trainer's policy goes over the harness's values before anything reads them (token mode
  // builds its sampling parameters from this body; the chat engines get it as is).
  const sampling = applySamplingPolicy(call.parsed.chat, sessionSamplingPolicy(call.session.meta));
  validateChatRequest(call.parsed.chat);
  // Checked before anything is sent; each engine request then carries it (`applyEnginePriority`).
  const priority = enginePriorityValue(sessionEnginePriority(call.session.meta), deps.priorityOrder ?? null);
  // A session a version gap ended gets the same answer at once: it is over, not held again.
  const gap = deps.store.versionGap(call.session.sessionId);
  if (gap) throw new PolicyVersionGapError(gap);
  const clientGone = new AbortController();
  const onClose = () => {
    if (!call.res.writableFinished) clientGone.abort();
  };
  call.res.on("close", onClose);
  deps.store.reserve(call.session.sessionId);
  let committed = false;
  try {
    const engine = deps.engine;
    // Token mode prepares the prompt once (the bridge counts turns); each admission sends it.
    const serve: (a: Admission) => Promise<CompletionRecord | null> =
      engine === null
        ? serveTokenTurn(deps, deps.tokenMode, call)
        : (a) =>
            call.parsed.stream && engine.streamsWithIds
              ? streamReal(deps, engine, call, a)
              : serveWhole(deps, engine, call, a);
    const record = await admitted(deps, call.session.meta, call.res, clientGone.signal, serve).catch(
      (err: unknown) => {
        if (err instanceof PolicyVersionGapError)
          deps.store.endForVersionGap(call.session.sessionId, err.gap);
        // The harness is about to get an engine failure the retries could not hide.
        const failure = engineFailureOf(err);
        if (failure && !clientGone.signal.aborted)
          deps.store.noteEngineFailure(call.session.sessionId, failure);
        throw err;
      },
    );
    if (record) {
      record.metadata.sampling = sampling;
      // The priority the engine was asked to schedule the call by, in its own order; null: none.
      record.metadata.engine_priority = priority;
      deps.store.commit(call.session.sessionId, record);
      committed = true;
      deps.metrics.completion({
        api: record.api_type,
        engine: record.engine,
        promptTokens: record.prompt_ids.length,
        responseTokens: record.response_ids.length,
        cachedTokens: record.cached_tokens,
        callSeconds: record.latency_ms / 1000,
      });
    }
  } finally {
    call.res.off("close", onClose);
    if (!committed) deps.store.release(call.session.sessionId);
  }
}

function buildRecord(
  deps: InferenceDeps,
  engine: EngineAdapter,
  call: InferenceCall,
  served: JsonObject,
  raw: JsonObject,
  extra: {
    latency_ms: number;
    replica: string;
    policyVersion: string | null;
    weightVersionStart: string | null;
    streamed: boolean;
  },
): CompletionRecord {
  const n = engine.normalizeChatResponse(raw);
  deps.replicas.observeWeightVersion(extra.replica, n.weight_version);
  return {
    completion_id: newCompletionId(),
    session_id: call.session.sessionId,
    timestamp: new Date().toISOString(),
    api_type: call.family.api,
    engine: engine.name,
    model_requested: call.parsed.requestedModel,
    model_used: deps.modelServed,
    original_request: call.original,
    request: served,
    response: engine.recordableResponse(raw),
    prompt_ids: n.prompt_ids,
    response_ids: n.response_ids,
    response_logprobs: n.response_logprobs,
    finish_reason: n.finish_reason,
    weight_version: n.weight_version,
    weight_version_start: extra.weightVersionStart,
    policy_version: extra.policyVersion,
    cached_tokens: n.cached_tokens,
    latency_ms: extra.latency_ms,
    replica: extra.replica,
    metadata: {
      engine_response_id: raw.id ?? null,
      session_meta: call.session.meta,
      policy_version: extra.policyVersion,
      path: call.path,
      client_stream: call.parsed.stream,
      engine_stream: extra.streamed,
    },
  };
}

/** Non-streaming engine call; the reply is JSON or a stream synthesised from the whole answer. */
async function serveWhole(
  deps: InferenceDeps,
  engine: EngineAdapter,
  call: InferenceCall,
  a: Admission,
): Promise<CompletionRecord> {
  const served = engine.buildChatRequest(call.parsed.chat, {
    modelServed: deps.modelServed,
    sessionId: call.session.sessionId,
  });
  applyEnginePriority(served.body, call.session.meta, deps.priorityOrder ?? null);
  const rid = withRid(engine, served.body, call.session.sessionId);
  const started = performance.now();
  let weightVersionStart: string | null = null;
  const { value: upstream, url } = await withReplica(
    deps,
    call.session.sessionId,
    (base) => {
      weightVersionStart = deps.replicas.weightVersion(base);
      if (rid) a.ticket.onAbort(() => abortRequest(base, rid, call.session.sessionId, deps.replicas));
      return postJson(`${base}${engine.chatPath}`, served.body, served.headers, {
        timeoutMs: deps.timeoutMs,
        signal: a.signal,
      });
    },
    a.exclude,
    a.signal,
  );
  const latency_ms = performance.now() - started;
  if (upstream.status < 200 || upstream.status >= 300) {
    throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(upstream.body);
  } catch {
    throw new EngineContractError("(body)", "is not valid JSON");
  }
  if (!isObject(raw)) throw new EngineContractError("(body)", "is not a JSON object");
  if (a.ticket.aborted) throw new Error("aborted by a weight-update pause");
  const record = buildRecord(deps, engine, call, served.body, raw, {
    latency_ms,
    replica: url,
    policyVersion: a.policyVersion,
    weightVersionStart,
    streamed: false,
  });
  replyWhole(call, engine.clientCompletion(raw));
  return record;
}

/**
 * SGLang's chat endpoint takes a `rid` (so a pause can `/abort_request` it): set one per call.
 * vLLM has no abort by id on its chat API; cutting the request aborts it there.
 */
function withRid(engine: EngineAdapter, body: JsonObject, sessionId: string): string | null {
  if (engine.name !== "sglang-openai") return null;
  const rid = newRid(sessionId, 0);
  body.rid = rid;
  return rid;
}

/**
 * Streams the engine's answer through as it is generated (engines that stream token ids), and
 * records the accumulated answer. Once the first byte went out, failures end the stream with the
 * family's error event and nothing is recorded.
 */
async function streamReal(
  deps: InferenceDeps,
  engine: EngineAdapter,
  call: InferenceCall,
  a: Admission,
): Promise<CompletionRecord | null> {
  const served = engine.buildChatRequest(call.parsed.chat, {
    modelServed: deps.modelServed,
    sessionId: call.session.sessionId,
    stream: true,
  });
  applyEnginePriority(served.body, call.session.meta, deps.priorityOrder ?? null);
  const started = performance.now();
  let weightVersionStart: string | null = null;
  const { value: upstream, url } = await withReplica(
    deps,
    call.session.sessionId,
    (base) => {
      weightVersionStart = deps.replicas.weightVersion(base);
      return postStream(`${base}${engine.chatPath}`, served.body, served.headers, {
        timeoutMs: deps.timeoutMs,
        signal: a.signal,
      });
    },
    a.exclude,
    a.signal,
  );
  if (!upstream.ok) throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
  const { res, family, parsed } = call;
  const writer = family.stream(parsed, { id: randomId(""), created: Math.floor(Date.now() / 1000) });
  res.writeHead(200, headersOf(writer.contentType));
  res.write(writer.start());
  const acc = new VllmStreamAccumulator();
  let firstToken = false;
  try {
    for await (const data of upstream.events) {
      if (data === "[DONE]") break;
      let chunk: unknown;
      try {
        chunk = JSON.parse(data);
      } catch {
        throw new EngineContractError("(stream chunk)", "is not valid JSON");
      }
      if (!isObject(chunk)) throw new EngineContractError("(stream chunk)", "is not a JSON object");
      if (chunk.error !== undefined) {
        throw new EngineStatusError(500, JSON.stringify({ error: chunk.error }), "application/json");
      }
      if (!firstToken && carriesTokens(chunk)) {
        firstToken = true;
        deps.metrics.firstToken(engine.name, (performance.now() - started) / 1000);
      }
      let out = "";
      for (const ev of acc.push(chunk)) out += writer.delta(ev);
      if (out) res.write(out);
    }
    const raw = acc.result();
    const record = buildRecord(deps, engine, call, served.body, raw, {
      latency_ms: performance.now() - started,
      replica: url,
      policyVersion: a.policyVersion,
      weightVersionStart,
      streamed: true,
    });
    let out = "";
    for (const c of acc.toolCalls()) out += writer.delta({ kind: "tool_call", ...c });
    res.end(out + writer.finish(engine.clientCompletion(raw)));
    return record;
  } catch (err) {
    upstream.cancel();
    deps.metrics.error(
      a.ticket.aborted
        ? "engine_aborted"
        : err instanceof Error && err.name === "AbortError"
          ? "client_closed"
          : classifyError(err).code,
    );
    if (a.ticket.aborted && !res.writableEnded) {
      // Bytes already reached the harness: it cannot be re-issued unseen; the harness retries.
      res.end(
        writer.error(
          classifyError(
            new ProxyHttpError(
              503,
              "api_error",
              "engine_aborted",
              "the generation was aborted for a weight update; retry",
            ),
          ),
        ),
      );
      return null;
    }
    if (err instanceof Error && err.name === "AbortError") {
      res.destroy();
      return null;
    }
    if (!res.writableEnded) res.end(writer.error(classifyError(err)));
    return null;
  }
}

/**
 * Whether a stream chunk carries generated tokens (ids, text, reasoning or a tool call): the
 * first such chunk is the time to first token. The opening chunk (role only) carries none.
 */
function carriesTokens(chunk: JsonObject): boolean {
  const choices = Array.isArray(chunk.choices) ? chunk.choices : [];
  return choices.some((c) => {
    if (!isObject(c)) return false;
    if (Array.isArray(c.token_ids) && c.token_ids.length > 0) return true;
    const d = isObject(c.delta) ? c.delta : {};
    return Boolean(d.content || d.reasoning || d.reasoning_content || d.tool_calls);
  });
}
