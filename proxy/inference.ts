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
import { engineChunks } from "./engine-sse";
import { type EngineAdapter, VllmStreamAccumulator } from "./engines";
import { validateChatRequest } from "./engines/sglang-openai";
import { newRid } from "./engines/sglang-token/generate";
import { serveTokenTurn } from "./engines/sglang-token/serve";
import {
  EngineAbortedError,
  EngineContractError,
  EngineStatusError,
  engineFailureOf,
  failureCode,
  isAbortError,
  PolicyVersionGapError,
  sendFamilyError,
} from "./errors";
import type { StreamWriter } from "./families/types";
import { isObject, randomId } from "./json";
import { applySamplingPolicy, sessionSamplingPolicy } from "./sampling";
import { postJson, postStream } from "./upstream";

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

/** Where and how a call was served, as its record states it. */
interface RecordExtra {
  latency_ms: number;
  replica: string;
  policyVersion: string | null;
  weightVersionStart: string | null;
  streamed: boolean;
}

function buildRecord(
  deps: InferenceDeps,
  engine: EngineAdapter,
  call: InferenceCall,
  served: JsonObject,
  raw: JsonObject,
  extra: RecordExtra,
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

/** The engine request of a call: the adapter's body, with the session's priority on it. */
function engineRequest(deps: InferenceDeps, engine: EngineAdapter, call: InferenceCall, stream: boolean) {
  const served = engine.buildChatRequest(call.parsed.chat, {
    modelServed: deps.modelServed,
    sessionId: call.session.sessionId,
    ...(stream ? { stream: true } : {}),
  });
  applyEnginePriority(served.body, call.session.meta, deps.priorityOrder ?? null);
  return served;
}

/** What a replica answered, which one it was, and the weight version the call started under. */
interface Sent<T> {
  value: T;
  url: string;
  weightVersionStart: string | null;
}

/** Sends a call to a replica (with failover, {@link withReplica}), noting its starting weight version. */
async function toReplica<T>(
  deps: InferenceDeps,
  call: InferenceCall,
  a: Admission,
  send: (base: string) => Promise<T>,
): Promise<Sent<T>> {
  let weightVersionStart: string | null = null;
  const { value, url } = await withReplica(
    deps,
    call.session.sessionId,
    (base) => {
      weightVersionStart = deps.replicas.weightVersion(base);
      return send(base);
    },
    a.exclude,
    a.signal,
  );
  return { value, url, weightVersionStart };
}

/** Non-streaming engine call; the reply is JSON or a stream synthesised from the whole answer. */
async function serveWhole(
  deps: InferenceDeps,
  engine: EngineAdapter,
  call: InferenceCall,
  a: Admission,
): Promise<CompletionRecord> {
  const served = engineRequest(deps, engine, call, false);
  const rid = withRid(engine, served.body, call.session.sessionId);
  const started = performance.now();
  const sent = await toReplica(deps, call, a, (base) => {
    if (rid) a.ticket.onAbort(() => abortRequest(base, rid, call.session.sessionId, deps.replicas));
    return postJson(`${base}${engine.chatPath}`, served.body, served.headers, {
      timeoutMs: deps.timeoutMs,
      signal: a.signal,
    });
  });
  const latency_ms = performance.now() - started;
  const upstream = sent.value;
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
  const record = buildRecord(deps, engine, call, served.body, raw, recordExtra(sent, a, latency_ms, false));
  replyWhole(call, engine.clientCompletion(raw));
  return record;
}

/** The record fields of where and how a call was served. */
function recordExtra(sent: Sent<unknown>, a: Admission, latency_ms: number, streamed: boolean): RecordExtra {
  return {
    latency_ms,
    replica: sent.url,
    policyVersion: a.policyVersion,
    weightVersionStart: sent.weightVersionStart,
    streamed,
  };
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
  const served = engineRequest(deps, engine, call, true);
  const started = performance.now();
  const sent = await toReplica(deps, call, a, (base) =>
    postStream(`${base}${engine.chatPath}`, served.body, served.headers, {
      timeoutMs: deps.timeoutMs,
      signal: a.signal,
    }),
  );
  const upstream = sent.value;
  if (!upstream.ok) throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
  const { res, family, parsed } = call;
  const writer = family.stream(parsed, { id: randomId(""), created: Math.floor(Date.now() / 1000) });
  res.writeHead(200, headersOf(writer.contentType));
  res.write(writer.start());
  try {
    const acc = await relay(deps, engine, upstream.events, writer, res, started);
    const raw = acc.result();
    const extra = recordExtra(sent, a, performance.now() - started, true);
    const record = buildRecord(deps, engine, call, served.body, raw, extra);
    let out = "";
    for (const c of acc.toolCalls()) out += writer.delta({ kind: "tool_call", ...c });
    res.end(out + writer.finish(engine.clientCompletion(raw)));
    return record;
  } catch (err) {
    upstream.cancel();
    endBrokenStream(deps, a, call, writer, err);
    return null;
  }
}

/**
 * Writes the deltas of each engine chunk to the harness as it arrives, and returns what they add
 * up to. The first chunk that carries tokens is the time to first token.
 */
async function relay(
  deps: InferenceDeps,
  engine: EngineAdapter,
  payloads: AsyncIterable<string>,
  writer: StreamWriter,
  res: http.ServerResponse,
  started: number,
): Promise<VllmStreamAccumulator> {
  const acc = new VllmStreamAccumulator();
  let firstToken = false;
  for await (const chunk of engineChunks(payloads)) {
    if (!firstToken && carriesTokens(chunk)) {
      firstToken = true;
      deps.metrics.firstToken(engine.name, (performance.now() - started) / 1000);
    }
    let out = "";
    for (const ev of acc.push(chunk)) out += writer.delta(ev);
    if (out) res.write(out);
  }
  return acc;
}

/**
 * Ends a stream that failed after its first byte. Bytes already reached the harness, so the call
 * cannot be re-issued unseen: a weight-update abort tells the harness to retry, a closed client is
 * hung up on, anything else ends the stream with the family's error event.
 */
function endBrokenStream(
  deps: InferenceDeps,
  a: Admission,
  call: InferenceCall,
  writer: StreamWriter,
  err: unknown,
): void {
  const { res, family } = call;
  deps.metrics.error(a.ticket.aborted ? "engine_aborted" : failureCode(err));
  if (a.ticket.aborted && !res.writableEnded) sendFamilyError(res, family, new EngineAbortedError(), writer);
  else if (isAbortError(err)) res.destroy();
  else if (!res.writableEnded) sendFamilyError(res, family, err, writer);
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
