/**
 * Typed API errors. Handlers throw them; `app.onError` is the one place that turns them (and
 * anything unexpected) into `{error: {code, message, details?}}` responses.
 *
 * @module
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * An error with an HTTP status and a stable machine-readable code.
 *
 * @example
 * ```ts
 * throw ApiError.notFound(`batch 'b_1' does not exist`);
 * ```
 */
export class ApiError extends Error {
  override name = "ApiError";

  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }

  /** 400 with a code naming what was wrong (`invalid_json`, `validation_failed`, …). */
  static badRequest(code: string, message: string, details?: unknown): ApiError {
    return new ApiError(400, code, message, details);
  }

  /** 401: missing or wrong bearer token. */
  static unauthorized(message: string): ApiError {
    return new ApiError(401, "unauthorized", message, undefined, {
      "WWW-Authenticate": 'Bearer realm="polar"',
    });
  }

  /** 403: a valid token of a role that may not use this route. */
  static forbidden(message: string): ApiError {
    return new ApiError(403, "forbidden", message);
  }

  /** 404. */
  static notFound(message: string): ApiError {
    return new ApiError(404, "not_found", message);
  }

  /** 409: the resource exists with other content. */
  static conflict(message: string): ApiError {
    return new ApiError(409, "conflict", message);
  }

  /** 413: body or part of it over a limit. */
  static tooLarge(message: string): ApiError {
    return new ApiError(413, "payload_too_large", message);
  }

  /** 426: the route needs a WebSocket upgrade. */
  static upgradeRequired(message: string): ApiError {
    return new ApiError(426, "upgrade_required", message, undefined, { Upgrade: "websocket" });
  }

  /** 503: the deployment lacks a secret it needs. */
  static notConfigured(message: string): ApiError {
    return new ApiError(503, "not_configured", message);
  }
}

/**
 * Error body shape (`protocol/api.ts` ErrorBody).
 *
 * @example
 * ```ts
 * c.json(errorBody("not_found", "batch 'b_1' does not exist"), 404);
 * ```
 */
export function errorBody(code: string, message: string, details?: unknown) {
  return { error: details === undefined ? { code, message } : { code, message, details } };
}
