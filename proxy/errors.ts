/**
 * Typed errors of the proxy and the one place that maps them to answers: {@link classifyError}
 * decides each error's status, type and code, and {@link sendFamilyError} writes it in the caller's
 * family (a JSON error body, the engine's own answer passed through, or the family's error event
 * once a stream has started). OpenAI's shape (`{error: {message, type, param, code}}`) is the
 * default, which every OpenAI client library parses.
 *
 * @module
 */
import type http from "node:http";
import { versionNumber } from "../protocol";
import type { Family, StreamWriter } from "./families/types";

/** OpenAI's error body. `code` and `message` also satisfy the project's `{error:{code,message}}`. */
export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: string };
}

/**
 * An error that already knows its HTTP status and OpenAI error type/code.
 *
 * @example
 * ```ts
 * throw new ProxyHttpError(400, "invalid_request_error", "missing_messages", "messages: required");
 * ```
 */
export class ProxyHttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = "ProxyHttpError";
  }
}

/**
 * A pause in `abort` mode cut the generation after bytes of it reached the harness: the call cannot
 * be issued again unseen, so the harness is told to retry (503, which SDKs retry).
 *
 * @example
 * ```ts
 * res.end(writer.error(classifyError(new EngineAbortedError())));
 * ```
 */
export class EngineAbortedError extends ProxyHttpError {
  constructor() {
    super(503, "api_error", "engine_aborted", "the generation was aborted for a weight update; retry");
    this.name = "EngineAbortedError";
  }
}

/**
 * The error a request's abort rejects with: the harness went away (or a fence cut the wait), so
 * there is nobody to answer. Named `AbortError` like the platform's own aborts.
 *
 * @example
 * ```ts
 * signal.addEventListener("abort", () => reject(clientAbortError()), { once: true });
 * ```
 */
export function clientAbortError(): Error {
  return Object.assign(new Error("request aborted by the client"), { name: "AbortError" });
}

/**
 * Whether an error is an abort (the platform's, {@link clientAbortError}, a fence's): the caller
 * is gone, so the answer is to hang up, not to write an error.
 *
 * @example
 * ```ts
 * if (isAbortError(err)) res.destroy();
 * ```
 */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && err.name === "AbortError";
}

/**
 * The engine answered 2xx but without a field the proxy relies on (prompt ids, output ids). The
 * call cannot be recorded as token-exact, so it is refused rather than captured half-blind.
 *
 * @example
 * ```ts
 * throw new EngineContractError("choices[0].prompt_token_ids");
 * ```
 */
export class EngineContractError extends Error {
  constructor(
    readonly field: string,
    detail = "missing from the engine response",
  ) {
    super(`engine contract violation: ${field} ${detail}`);
    this.name = "EngineContractError";
  }
}

/**
 * The engine answered non-2xx: status and body are passed through to the harness unchanged.
 *
 * @example
 * ```ts
 * throw new EngineStatusError(503, '{"error":{"message":"overloaded"}}', "application/json");
 * ```
 */
export class EngineStatusError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly contentType: string | null,
  ) {
    super(`engine answered HTTP ${status}`);
    this.name = "EngineStatusError";
  }
}

/**
 * The engine could not be reached (connection refused, reset, DNS) → 502.
 *
 * @example
 * ```ts
 * throw new EngineUnreachableError("http://127.0.0.1:30000", "connect ECONNREFUSED");
 * ```
 */
export class EngineUnreachableError extends Error {
  constructor(
    readonly engineUrl: string,
    reason: string,
  ) {
    super(`engine at ${engineUrl} is unreachable: ${reason}`);
    this.name = "EngineUnreachableError";
  }
}

/**
 * The engine did not answer within `requestTimeoutMs` → 504.
 *
 * @example
 * ```ts
 * throw new EngineTimeoutError("http://127.0.0.1:30000", 900_000);
 * ```
 */
export class EngineTimeoutError extends Error {
  constructor(
    readonly engineUrl: string,
    readonly timeoutMs: number,
  ) {
    super(`engine at ${engineUrl} did not answer within ${timeoutMs} ms`);
    this.name = "EngineTimeoutError";
  }
}

/**
 * The words of an engine-side failure that reached a harness (the engine unreachable, timed out,
 * answering 5xx, or breaking its contract), or null for any other error (the call's own fault, a
 * fence, a closed client). The gateway ends such a session as an infra failure: it is run again on
 * a fresh runtime and never scored, since the agent acted on an answer the engine never gave.
 *
 * @example
 * ```ts
 * engineFailureOf(new EngineStatusError(503, "", null)); // "engine answered HTTP 503"
 * engineFailureOf(new ProxyHttpError(400, "invalid_request_error", "invalid_request", "x")); // null
 * ```
 */
export function engineFailureOf(err: unknown): string | null {
  if (err instanceof EngineStatusError) return err.status >= 500 ? err.message : null;
  if (err instanceof EngineUnreachableError || err instanceof EngineTimeoutError) return err.message;
  if (err instanceof EngineContractError) return err.message;
  return null;
}

/** Why a session's call was not served: every replica stayed behind its `min_policy_version`. */
export interface PolicyVersionGap {
  /** The session's `min_policy_version`. */
  needed: number;
  /** Each replica's weight version as it last reported it (null: it could not say). */
  reported: Array<{ url: string; weight_version: string | null }>;
  /** How long the call was held, time at a paused fence not counted (ms). */
  held_ms: number;
  /** The bound it was held against (`policyVersionWaitMs`). */
  wait_ms: number;
}

/**
 * The words of a {@link PolicyVersionGap}, led by the task field it is about (as the gateway's
 * other configuration errors are): `min_policy_version: needs policy version 3; replicas report 2
 * (http://127.0.0.1:30000: "2"); held 120 s (bound 120 s)`. "replicas report" is the newest
 * version any replica reports, or `no version` when none reports a decimal one.
 *
 * @example
 * ```ts
 * policyVersionGapMessage({ needed: 3, reported: [{ url: "http://e:1", weight_version: "2" }], held_ms: 0, wait_ms: 0 });
 * ```
 */
export function policyVersionGapMessage(gap: PolicyVersionGap): string {
  const numbers = gap.reported
    .map((r) => versionNumber(r.weight_version))
    .filter((n): n is number => n !== null);
  const newest = numbers.length > 0 ? String(Math.max(...numbers)) : "no version";
  const each = gap.reported.map((r) => `${r.url}: ${JSON.stringify(r.weight_version)}`).join(", ");
  const secs = (ms: number) => `${Math.round(ms / 100) / 10} s`;
  return `min_policy_version: needs policy version ${gap.needed}; replicas report ${newest} (${each}); held ${secs(gap.held_ms)} (bound ${secs(gap.wait_ms)})`;
}

/**
 * Every replica stayed behind the session's `min_policy_version` for longer than the proxy's
 * `policyVersionWaitMs` → 400 `policy_version_unavailable`. A 4xx, so SDKs do not retry it (they
 * retry 408, 409, 429 and 5xx); the session is over, and its later calls get the same answer.
 *
 * @example
 * ```ts
 * throw new PolicyVersionGapError({ needed: 3, reported: [], held_ms: 120_000, wait_ms: 120_000 });
 * ```
 */
export class PolicyVersionGapError extends Error {
  constructor(readonly gap: PolicyVersionGap) {
    super(policyVersionGapMessage(gap));
    this.name = "PolicyVersionGapError";
  }
}

/**
 * Misuse of the session API (`openSession` twice for one id). Never reaches a harness.
 *
 * @example
 * ```ts
 * throw new SessionStateError("s-1", "is already open");
 * ```
 */
export class SessionStateError extends Error {
  constructor(
    readonly sessionId: string,
    detail: string,
  ) {
    super(`session '${sessionId}' ${detail}`);
    this.name = "SessionStateError";
  }
}

/**
 * A builder strategy name that no builder is registered for.
 *
 * @example
 * ```ts
 * throw new UnknownBuilderError("tree", ["per_request"]);
 * ```
 */
export class UnknownBuilderError extends Error {
  constructor(
    readonly strategy: string,
    known: readonly string[],
  ) {
    super(`unknown builder strategy '${strategy}' (known: ${known.join(", ")})`);
    this.name = "UnknownBuilderError";
  }
}

/**
 * Builds an OpenAI error body.
 *
 * @example
 * ```ts
 * openAiError("invalid key", "invalid_request_error", "invalid_api_key");
 * ```
 */
export function openAiError(
  message: string,
  type: string,
  code: string,
  param: string | null = null,
): OpenAiErrorBody {
  return { error: { message, type, param, code } };
}

/** What the HTTP layer writes for an error: status, content type and body text. */
export interface HttpErrorResponse {
  status: number;
  contentType: string;
  body: string;
}

/** An error classified for a harness: status, OpenAI-style type/code, message and offending field. */
export interface ClassifiedError {
  status: number;
  type: string;
  code: string;
  message: string;
  param: string | null;
  /** The engine's own answer, for families that pass it through unchanged (OpenAI Chat). */
  passthrough: HttpErrorResponse | null;
}

/**
 * Engine messages that mean "the prompt does not fit" (SGLang: "…longer than the model's context
 * length…", vLLM: "This model's maximum context length is…"); LiteLLM-based agents only compact
 * their history when they see OpenAI's `context_length_exceeded`.
 */
const CONTEXT_LENGTH = /context length|maximum context|context window|prompt is too long|too many tokens/i;

function engineMessage(body: string): string {
  try {
    const json = JSON.parse(body) as { message?: unknown; error?: { message?: unknown } | string };
    if (typeof json.message === "string") return json.message;
    if (typeof json.error === "string") return json.error;
    if (json.error && typeof json.error.message === "string") return json.error.message;
  } catch {
    // Not JSON: the text itself is the message.
  }
  return body.slice(0, 2000);
}

/**
 * Classifies any error thrown while serving a request. This is the only place that decides
 * statuses, so the error table lives here and nowhere else; the families only render it.
 *
 * @example
 * ```ts
 * const e = classifyError(new EngineTimeoutError("http://127.0.0.1:30000", 1000)); // e.status === 504
 * ```
 */
export function classifyError(err: unknown): ClassifiedError {
  const make = (
    status: number,
    type: string,
    code: string,
    message: string,
    param: string | null = null,
  ) => ({
    status,
    type,
    code,
    message,
    param,
    passthrough: null,
  });
  if (err instanceof ProxyHttpError) return make(err.status, err.type, err.code, err.message, err.param);
  if (err instanceof EngineStatusError) {
    const message = engineMessage(err.body);
    if (err.status >= 400 && err.status < 500 && CONTEXT_LENGTH.test(message)) {
      return make(
        400,
        "invalid_request_error",
        "context_length_exceeded",
        `This model's maximum context length was exceeded: ${message}`,
        "messages",
      );
    }
    return {
      ...make(err.status, err.status >= 500 ? "api_error" : "invalid_request_error", "engine_error", message),
      // Pass the engine's own answer through: its message is the most useful thing the harness can see.
      passthrough: { status: err.status, contentType: err.contentType ?? "application/json", body: err.body },
    };
  }
  if (err instanceof EngineContractError)
    return make(502, "api_error", "engine_contract_violation", err.message, err.field);
  if (err instanceof EngineUnreachableError) return make(502, "api_error", "engine_unreachable", err.message);
  if (err instanceof EngineTimeoutError) return make(504, "timeout_error", "engine_timeout", err.message);
  if (err instanceof PolicyVersionGapError)
    return make(
      400,
      "invalid_request_error",
      "policy_version_unavailable",
      err.message,
      "min_policy_version",
    );
  const message = err instanceof Error ? err.message : String(err);
  return make(500, "api_error", "internal_error", `internal proxy error: ${message}`);
}

/**
 * The HTTP answer for an error, before anything was written: the engine's own answer when it is
 * passed through (`passthrough`: the caller's family is OpenAI-shaped already), else `body` of the
 * classified error as JSON.
 */
function errorResponse(
  e: ClassifiedError,
  body: (e: ClassifiedError) => unknown,
  passthrough: boolean,
): HttpErrorResponse {
  if (e.passthrough && passthrough) return e.passthrough;
  return { status: e.status, contentType: "application/json", body: JSON.stringify(body(e)) };
}

/**
 * Maps an error to an OpenAI-shaped response (engine answers passed through unchanged).
 *
 * @example
 * ```ts
 * const { status, contentType, body } = toHttpErrorResponse(err);
 * res.writeHead(status, { "content-type": contentType }).end(body);
 * ```
 */
export function toHttpErrorResponse(err: unknown): HttpErrorResponse {
  return errorResponse(classifyError(err), (e) => openAiError(e.message, e.type, e.code, e.param), true);
}

/**
 * Writes an error in the family's native shape. Before the answer started: OpenAI Chat harnesses
 * get the engine's own error body unchanged (it is already OpenAI-shaped), the other families get
 * it wrapped in theirs. Once it started: the stream ends with the family's error event, written by
 * the stream's own `writer` (it numbers or brackets its frames) or, without one, a fresh writer.
 *
 * @example
 * ```ts
 * sendFamilyError(res, anthropic, new ProxyHttpError(401, "invalid_request_error", "invalid_api_key", "…"));
 * ```
 */
export function sendFamilyError(
  res: http.ServerResponse,
  family: Family,
  err: unknown,
  writer?: StreamWriter,
): void {
  const e = classifyError(err);
  if (res.headersSent) {
    const blank = { chat: {}, stream: true, requestedModel: null, reply: {} };
    res.end((writer ?? family.stream(blank, { id: "error", created: 0 })).error(e));
    return;
  }
  const r = errorResponse(e, (c) => family.errorBody(c), family.api === "openai_chat");
  res.writeHead(r.status, { "content-type": r.contentType }).end(r.body);
}

/**
 * The code a failure is counted under: `client_closed` for an abort, else its classified code.
 *
 * @example
 * ```ts
 * metrics.error(failureCode(err)); // "engine_timeout", "client_closed", …
 * ```
 */
export function failureCode(err: unknown): string {
  return isAbortError(err) ? "client_closed" : classifyError(err).code;
}
