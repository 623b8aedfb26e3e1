/**
 * Reading request bodies under a byte limit, and hashing parsed requests canonically (for
 * idempotent replays: same content, same hash, whatever the key order or defaulted fields).
 *
 * @module
 */
import { LIMITS, readBoundedBody, tooDeep, tooDeepMessage } from "../protocol";
import { ApiError } from "./errors";

/**
 * Reads a JSON body of at most `maxBytes`: 413 `payload_too_large` when Content-Length or the
 * bytes actually received exceed it (the stream is cancelled as soon as they do), 400
 * `invalid_json` when the body is empty or not JSON.
 *
 * @example
 * ```ts
 * const raw = await readJsonBody(c.req.raw, LIMITS.maxBodyBytes);
 * ```
 */
export async function readJsonBody(request: Request, maxBytes: number): Promise<unknown> {
  const text = await readBodyText(request, maxBytes);
  if (text.trim() === "")
    throw ApiError.badRequest("invalid_json", "request body is empty; expected a JSON object");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw ApiError.badRequest("invalid_json", `request body is not valid JSON: ${(error as Error).message}`);
  }
  refuseTooDeep(value);
  return value;
}

/**
 * 400 `validation_failed` naming where `value` nests past `LIMITS.maxJsonDepth`: deeper input
 * would overflow the stack wherever it is next stringified or sent to a Durable Object.
 *
 * @example
 * ```ts
 * refuseTooDeep(JSON.parse(text));
 * ```
 */
export function refuseTooDeep(value: unknown): void {
  const path = tooDeep(value);
  if (path === null) return;
  throw ApiError.badRequest("validation_failed", tooDeepMessage(path), [
    { field: path, message: `nests more than ${LIMITS.maxJsonDepth} levels deep` },
  ]);
}

/**
 * Reads a request body as UTF-8 text up to `maxBytes` (413 past it, before reading when
 * `Content-Length` says so).
 *
 * @example
 * ```ts
 * const text = await readBodyText(c.req.raw, 64 * 1024);
 * ```
 */
export async function readBodyText(request: Request, maxBytes: number): Promise<string> {
  const declared = request.headers.get("Content-Length");
  if (declared !== null && Number(declared) > maxBytes) {
    throw ApiError.tooLarge(`request body is ${declared} bytes; the limit is ${maxBytes}`);
  }
  // The project's one bounded reader: leaving its loop early cancels the stream, so the rest of
  // an oversized body is never read.
  return readBoundedBody(request.body ?? noBody(), maxBytes, (limit) =>
    ApiError.tooLarge(`request body exceeds the limit of ${limit} bytes`),
  );
}

/** The bytes of a request without a body: none. */
async function* noBody(): AsyncGenerator<Uint8Array> {}

/**
 * JSON with object keys sorted at every level (undefined members dropped, as JSON.stringify does).
 *
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] }); // '{"a":[{"c":3,"d":2}],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((v) => (v === undefined ? "null" : canonicalJson(v))).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * SHA-256 (hex) of `canonicalJson(value)`.
 *
 * @example
 * ```ts
 * await canonicalHash({ a: 1 }) === await canonicalHash({ a: 1 }); // true
 * ```
 */
export async function canonicalHash(value: unknown): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(canonicalJson(value)));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * UTF-8 length of a string.
 *
 * @example
 * ```ts
 * utf8Length("é"); // 2
 * ```
 */
export function utf8Length(text: string): number {
  return new TextEncoder().encode(text).byteLength;
}
