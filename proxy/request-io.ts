/**
 * The proxy's HTTP plumbing shared by its routes (inference and admin): the bounded body read and
 * the JSON answer. Apart from `server.ts` so the admin routes need nothing from the server module.
 *
 * @module
 */
import type http from "node:http";
import { type JsonObject, readBoundedBody } from "../protocol";
import { ProxyHttpError } from "./errors";
import { isObject } from "./json";

/** Largest request body a harness may send (bytes); above it the proxy answers 413. */
export const MAX_REQUEST_BODY_BYTES = 32 * 1024 * 1024;

/**
 * Reads a request body up to `limit` bytes (413 above it).
 *
 * @example
 * ```ts
 * const text = await readBody(req, MAX_REQUEST_BODY_BYTES);
 * ```
 */
export function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return readBoundedBody(
    req,
    limit,
    (n) => new ProxyHttpError(413, "invalid_request_error", "request_too_large", `body exceeds ${n} bytes`),
  );
}

/**
 * A request body's JSON (400 `invalid_json` when it is not JSON).
 *
 * @example
 * ```ts
 * const body = parseJsonBody(await readBody(req, MAX_REQUEST_BODY_BYTES));
 * ```
 */
export function parseJsonBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ProxyHttpError(400, "invalid_request_error", "invalid_json", "(body): not valid JSON");
  }
}

/**
 * A request body that must be a JSON object (400 `invalid_request` when it is not).
 *
 * @example
 * ```ts
 * const original = jsonObjectBody(body);
 * ```
 */
export function jsonObjectBody(body: unknown): JsonObject {
  if (isObject(body)) return body;
  throw new ProxyHttpError(400, "invalid_request_error", "invalid_request", "(body): must be a JSON object");
}

/**
 * Sends a JSON body.
 *
 * @example
 * ```ts
 * sendJson(res, 200, { ok: true });
 * ```
 */
export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}
