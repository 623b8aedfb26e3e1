/**
 * Small node:http helpers of the simulated engine: JSON bodies with a size limit, JSON replies, and
 * the one place where errors become HTTP responses (OpenAI error shape, as SGLang answers).
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { describeIssues, fieldIssues, readBoundedBody } from "../protocol";
import { ChatTemplateError } from "../tokenizer/chat-tokenizer";
import { EngineInputError } from "./engine";
import { PriorityDisabledError, PriorityRequestError } from "./priority";
import { DuplicateRidError, EngineUnavailableError } from "./scheduler";

/**
 * An error with an HTTP status; `type` follows SGLang/OpenAI (`BadRequestError`, ...).
 *
 * @example
 * ```ts
 * throw new HttpError(400, "text / input_ids: give exactly one of text or input_ids");
 * ```
 */
export class HttpError extends Error {
  override readonly name = "HttpError";
  constructor(
    readonly status: number,
    message: string,
    readonly type = status === 404
      ? "NotFoundError"
      : status === 405
        ? "MethodNotAllowed"
        : "BadRequestError",
  ) {
    super(message);
  }
}

/**
 * Reads and parses a JSON request body, refusing bodies above `limitBytes` with 413.
 *
 * @example
 * ```ts
 * const body = await readJsonBody(req, 1 << 20);
 * ```
 */
export async function readJsonBody(req: IncomingMessage, limitBytes: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limitBytes) throw new HttpError(413, `request body is larger than ${limitBytes} bytes`);
  const text = await readBoundedBody(
    req,
    limitBytes,
    (n) => new HttpError(413, `request body is larger than ${n} bytes`),
  );
  if (text.trim() === "") throw new HttpError(400, "request body is empty; expected a JSON object");
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpError(400, `request body is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Validates a parsed body with a zod schema; failures become a 400 naming each field.
 *
 * @example
 * ```ts
 * const req = parseBody(GenerateRequest, await readJsonBody(req, limit));
 * ```
 */
export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const result = schema.safeParse(body);
  if (!result.success) throw new HttpError(400, describeIssues(fieldIssues(result.error)));
  return result.data;
}

/**
 * Sends a JSON response.
 *
 * @example
 * ```ts
 * sendJson(res, 200, { ok: true });
 * ```
 */
export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/**
 * Maps any error to a response: typed errors to 4xx with their message, anything else to 500.
 * This is the only place errors become HTTP statuses.
 *
 * @example
 * ```ts
 * try { await handle(req, res); } catch (e) { sendError(res, e); }
 * ```
 */
export function sendError(res: ServerResponse, error: unknown): void {
  let status = 500;
  let type = "InternalServerError";
  let message = error instanceof Error ? error.message : String(error);
  if (error instanceof HttpError) {
    status = error.status;
    type = error.type;
  } else if (error instanceof EngineUnavailableError || error instanceof PriorityDisabledError) {
    status = 503;
    type = "ServiceUnavailableError";
  } else if (error instanceof DuplicateRidError || error instanceof PriorityRequestError) {
    status = 400;
    type = "BadRequestError";
  } else if (error instanceof EngineInputError || error instanceof ChatTemplateError) {
    status = 400;
    type = "BadRequestError";
    if (error instanceof EngineInputError && error.field) message = `${error.field}: ${message}`;
  }
  if (res.headersSent) {
    // Mid-stream (SSE): SGLang reports errors as a data line, then the stream ends.
    res.end(`data: ${JSON.stringify({ error: { message, type, code: status } })}\n\n`);
    return;
  }
  sendJson(res, status, { object: "error", error: { message, type, param: null, code: status } });
}
