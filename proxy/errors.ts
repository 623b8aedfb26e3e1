/**
 * Typed errors of the proxy and the one place that maps them to HTTP responses in OpenAI's error
 * shape (`{error: {message, type, param, code}}`), which every OpenAI client library parses.
 *
 * @module
 */

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

/**
 * Maps any error thrown while serving a request to the response the harness gets. This is the
 * only place that decides statuses, so the error table lives here and nowhere else.
 *
 * @example
 * ```ts
 * const { status, contentType, body } = toHttpErrorResponse(err);
 * res.writeHead(status, { "content-type": contentType }).end(body);
 * ```
 */
export function toHttpErrorResponse(err: unknown): HttpErrorResponse {
  const json = (status: number, body: OpenAiErrorBody): HttpErrorResponse => ({
    status,
    contentType: "application/json",
    body: JSON.stringify(body),
  });
  if (err instanceof ProxyHttpError)
    return json(err.status, openAiError(err.message, err.type, err.code, err.param));
  if (err instanceof EngineStatusError) {
    // Pass the engine's own answer through: its message is the most useful thing the harness can see.
    return { status: err.status, contentType: err.contentType ?? "application/json", body: err.body };
  }
  if (err instanceof EngineContractError)
    return json(502, openAiError(err.message, "api_error", "engine_contract_violation", err.field));
  if (err instanceof EngineUnreachableError)
    return json(502, openAiError(err.message, "api_error", "engine_unreachable"));
  if (err instanceof EngineTimeoutError)
    return json(504, openAiError(err.message, "api_error", "engine_timeout"));
  const message = err instanceof Error ? err.message : String(err);
  return json(500, openAiError(`internal proxy error: ${message}`, "api_error", "internal_error"));
}
