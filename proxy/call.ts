/**
 * What a harness call is served with, shared by every engine: the deps (a chat engine adapter or
 * token mode, never neither), the call, replica failover and the whole-answer reply. The chat
 * path (`inference.ts`) and the token engine (`engines/sglang-token/`) both build on it, so
 * neither imports the other's module for these.
 *
 * @module
 */
import type http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import type { JsonObject, Logger } from "../protocol";
import type { CaptureStore, SessionView } from "./capture";
import type { PriorityOrder } from "./engine-priority";
import type { EngineAdapter } from "./engines";
import type { TokenMode } from "./engines/sglang-token/mode";
import { EngineUnreachableError } from "./errors";
import { completionDeltas } from "./families";
import type { Family, ParsedRequest } from "./families/types";
import type { InferenceFence } from "./fence";
import { isObject, randomId } from "./json";
import type { ProxyMetricsSink } from "./metrics";
import { MAX_CALL_ATTEMPTS, type ReplicaSet } from "./replicas";

/**
 * What a call needs from the proxy around it: exactly one of a chat engine adapter or token mode
 * (a deps with neither would leave every call unanswered, so the type has no such value).
 *
 * @example
 * ```ts
 * const deps: InferenceDeps = { engine: engineAdapter("vllm"), tokenMode: null, store, fence, replicas, modelServed, timeoutMs, metrics: NO_PROXY_METRICS };
 * ```
 */
export type InferenceDeps = CallContext &
  (
    | {
        /** The chat engine adapter: the engine answers chat completions. */
        engine: EngineAdapter;
        tokenMode: null;
      }
    | {
        engine: null;
        /** Token mode state (engine `sglang`): the proxy renders, bridges and parses itself. */
        tokenMode: TokenMode;
      }
  );

/** What every call needs, whichever engine answers it. */
export interface CallContext {
  store: CaptureStore;
  fence: InferenceFence;
  replicas: ReplicaSet;
  modelServed: string;
  timeoutMs: number;
  /** Longest hold for `min_policy_version` (ms); default `DEFAULT_POLICY_VERSION_WAIT_MS`. */
  policyVersionWaitMs?: number;
  /**
   * How sessions' `engine_priority` is sent (`engine-priority.ts`); null or unset: it is not,
   * because the engine does not schedule by priority or the operator said `off`.
   */
  priorityOrder?: PriorityOrder | null;
  /**
   * Token mode: a turn a pause in `abort` mode aborted keeps the tokens it sampled and continues
   * from them after resume (`engines/sglang-token/partial.ts`); false: it is issued again from its
   * start. Default true.
   */
  partialRollouts?: boolean;
  /**
   * How long a call keeps being retried while every replica is unavailable (unreachable, or
   * 502/503/504), with backoff, before the failure goes to the harness (ms); default
   * {@link DEFAULT_ENGINE_RETRY_MS}, 0 = one round of replicas only.
   */
  engineRetryMs?: number;
  /** Where the call's measurements go (`NO_PROXY_METRICS` when nobody counts). */
  metrics: ProxyMetricsSink;
  logger?: Logger;
}

/** The call as the proxy handles it. */
export interface InferenceCall {
  family: Family;
  session: SessionView;
  /** The body the harness sent, as parsed JSON. */
  original: JsonObject;
  parsed: ParsedRequest;
  path: string;
  res: http.ServerResponse;
}

/** Headers of a streamed answer. */
export function headersOf(contentType: string): Record<string, string> {
  return { "content-type": contentType, "cache-control": "no-cache", connection: "keep-alive" };
}

/**
 * Statuses that mean "this replica cannot take the call now", not "the call is wrong": SGLang's 503
 * while it starts, shuts down or is overloaded, and a router's 502/504 in front of a dead worker.
 */
export const UNAVAILABLE_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/** The HTTP status of an engine answer (`UpstreamResponse`, or a failed `UpstreamStream`), if any. */
function statusOf(value: unknown): number | null {
  if (!isObject(value) || value.ok === true) return null;
  return typeof value.status === "number" ? value.status : null;
}

/**
 * How long a call whose every replica is unavailable keeps being retried before the harness gets
 * the failure (ms): a restart of the engine, an overloaded router's 503s or a dropped connection
 * shorter than this never reaches the harness, so it cannot change what the agent does.
 *
 * @example
 * ```ts
 * startProxy({ engine: "sglang", engineUrl, modelServed, engineRetryMs: DEFAULT_ENGINE_RETRY_MS });
 * ```
 */
export const DEFAULT_ENGINE_RETRY_MS = 30_000;

/** Backoff between rounds of an unavailable call: 0.5 s doubling to 4 s. */
const RETRY_BACKOFF_MS = { first: 500, max: 4_000 };

/**
 * Tries replicas in turn, each at most once per round and at most {@link MAX_CALL_ATTEMPTS} of
 * them. A transport failure or a 502/503/504 answer moves on to the next replica: the attempt
 * happens before any byte goes to the harness, and an unavailable replica sampled nothing, so the
 * retried call is the only generation. The session is re-pinned to the replica that answered.
 * When a whole round was unavailable, the call waits (backoff) and tries another round, for
 * `engineRetryMs` in all; then the last answer (or error) is returned (thrown) to be passed
 * through. A 4xx is the call's own fault and is never retried. `signal` ends the waiting.
 *
 * @example
 * ```ts
 * const { value, url } = await withReplica(deps, sessionId, (base) => postJson(`${base}/generate`, body, {}, { timeoutMs }));
 * ```
 */
export async function withReplica<T>(
  deps: InferenceDeps,
  sessionId: string,
  attempt: (url: string) => Promise<T>,
  exclude: ReadonlySet<string> = new Set(),
  signal?: AbortSignal,
): Promise<{ value: T; url: string }> {
  const budget = deps.engineRetryMs ?? DEFAULT_ENGINE_RETRY_MS;
  const until = Date.now() + budget;
  let backoff = RETRY_BACKOFF_MS.first;
  for (;;) {
    const round = await replicaRound(deps, sessionId, attempt, exclude);
    if (round.ok) return round.result;
    const wait = Math.min(backoff, until - Date.now());
    if (wait <= 0 || signal?.aborted) {
      if ("error" in round) throw round.error;
      return round.result;
    }
    deps.logger?.warn("no engine replica available: retrying the call", {
      session_id: sessionId,
      retry_in_ms: wait,
      left_ms: until - Date.now(),
    });
    try {
      await sleep(wait, undefined, signal ? { signal } : {});
    } catch {
      if ("error" in round) throw round.error;
      return round.result;
    }
    backoff = Math.min(backoff * 2, RETRY_BACKOFF_MS.max);
  }
}

/** One round of {@link withReplica}: `ok` false when every replica tried was unavailable. */
type Round<T> =
  | { ok: true; result: { value: T; url: string } }
  | { ok: false; result: { value: T; url: string } }
  | { ok: false; error: unknown };

async function replicaRound<T>(
  deps: InferenceDeps,
  sessionId: string,
  attempt: (url: string) => Promise<T>,
  exclude: ReadonlySet<string>,
): Promise<Round<T>> {
  // Replicas behind the session's min_policy_version are never tried (nor count as attempts).
  const tried = new Set<string>(exclude);
  const limit = Math.min(deps.replicas.size, MAX_CALL_ATTEMPTS + exclude.size);
  for (;;) {
    const url = deps.replicas.pick(sessionId, tried);
    if (url === null) throw new EngineUnreachableError("(no replica)", "no engine replica is configured");
    tried.add(url);
    // The version the call starts under: re-read when weights may have changed since it was known.
    await deps.replicas.ensureVersion(url);
    const end = deps.replicas.begin(url);
    const last = tried.size >= limit;
    let value: T;
    try {
      value = await attempt(url);
    } catch (err) {
      const transport = err instanceof EngineUnreachableError;
      end({ ok: false, error: err instanceof Error ? err.message : String(err), transport });
      if (!transport) throw err;
      if (last) return { ok: false, error: err };
      continue;
    }
    const status = statusOf(value);
    if (status === null || (status >= 200 && status < 300)) {
      end({ ok: true });
      return { ok: true, result: { value, url } };
    }
    const unavailable = UNAVAILABLE_STATUSES.has(status);
    // A 4xx is the request's fault, not the replica's: no completion, no failure either.
    end({ ok: false, failed: status >= 500, error: `HTTP ${status}`, unavailable });
    if (!unavailable) return { ok: true, result: { value, url } };
    if (last) return { ok: false, result: { value, url } };
  }
}

/**
 * Answers a complete (internal-form) completion in the harness's family: JSON, or the family's
 * stream synthesised from the whole answer when the harness asked to stream.
 *
 * @example
 * ```ts
 * replyWhole(call, { id: "c1", choices: [{ index: 0, message, finish_reason: "stop" }], usage });
 * ```
 */
export function replyWhole(call: InferenceCall, completion: JsonObject): void {
  const { res, family, parsed } = call;
  if (!parsed.stream) {
    const text = JSON.stringify(family.respond(completion, parsed));
    res
      .writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
      .end(text);
    return;
  }
  const writer = family.stream(parsed, {
    id: String(completion.id ?? randomId("")),
    created: typeof completion.created === "number" ? completion.created : Math.floor(Date.now() / 1000),
  });
  let out = writer.start();
  for (const ev of completionDeltas(completion, parsed.reply.wantLogprobs === true)) out += writer.delta(ev);
  out += writer.finish(completion);
  res.writeHead(200, headersOf(writer.contentType)).end(out);
}
