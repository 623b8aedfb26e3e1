/**
 * Small JSON helpers shared by the family transforms and engine adapters.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import type { JsonObject } from "../protocol";
import { ProxyHttpError } from "./errors";

/**
 * True for a plain JSON object (not an array, not null).
 *
 * @example
 * ```ts
 * isObject({}); // true
 * isObject([]); // false
 * ```
 */
export const isObject = (v: unknown): v is JsonObject =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The objects of a list (anything else in it is skipped); `[]` for a non-list.
 *
 * @example
 * ```ts
 * objects([{ a: 1 }, 2]); // [{ a: 1 }]
 * ```
 */
export const objects = (v: unknown): JsonObject[] => (Array.isArray(v) ? v.filter(isObject) : []);

/**
 * A 400 in the family's error mapping that names the offending field.
 *
 * @example
 * ```ts
 * throw badField("messages[0].role", "required string");
 * ```
 */
export function badField(param: string, message: string): ProxyHttpError {
  return new ProxyHttpError(400, "invalid_request_error", "invalid_request", `${param}: ${message}`, param);
}

/**
 * A short random id with a prefix, e.g. `msg_3f9c…` (24 hex chars).
 *
 * @example
 * ```ts
 * randomId("resp_"); // "resp_0a1b2c…"
 * ```
 */
export function randomId(prefix: string): string {
  return `${prefix}${randomBytes(12).toString("hex")}`;
}

/**
 * Parses tool-call arguments into an object. Engines return them as a JSON string; a string that is
 * not a JSON object is kept under `_raw` so nothing the model produced is lost.
 *
 * @example
 * ```ts
 * parseArguments('{"a":1}'); // { a: 1 }
 * ```
 */
export function parseArguments(args: unknown): JsonObject {
  if (isObject(args)) return args;
  if (typeof args !== "string" || args.trim() === "") return {};
  try {
    const parsed = JSON.parse(args) as unknown;
    return isObject(parsed) ? parsed : { _raw: args };
  } catch {
    return { _raw: args };
  }
}

/**
 * The bytes every reasoning token this proxy mints starts with, once base64-decoded: what tells
 * our token from a foreign one (a real provider's signature never starts with them).
 */
const REASONING_MAGIC = Buffer.from("polar2\0", "latin1");

/** The first form (`polar1.<base64url>`): not base64, so Google's SDKs refused it; still read. */
const LEGACY_PREFIX = "polar1.";

/** Standard or URL-safe base64, padded or not: clients re-encode bytes fields either way. */
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/**
 * Reasoning text carried in an opaque, client-held field (Anthropic `signature`, Responses
 * `encrypted_content`, Google `thoughtSignature`): the client sends it back unchanged on the next
 * turn, so the reasoning survives even when the client drops the visible text.
 *
 * The token is standard base64 (with padding) of {@link REASONING_MAGIC} followed by the UTF-8
 * text, so it is valid wherever a family's schema types the field: a plain string (Anthropic,
 * Responses) or a bytes field serialised as base64 (Google's `thoughtSignature`).
 *
 * @example
 * ```ts
 * decodeReasoning(encodeReasoning("let me think")); // "let me think"
 * ```
 */
export function encodeReasoning(text: string): string {
  return Buffer.concat([REASONING_MAGIC, Buffer.from(text, "utf8")]).toString("base64");
}

/**
 * Inverse of {@link encodeReasoning}, whichever base64 alphabet the client re-encoded the bytes
 * with; also reads the older `polar1.` tokens. Null for a token this proxy did not mint.
 *
 * @example
 * ```ts
 * decodeReasoning("opaque-from-elsewhere"); // null
 * ```
 */
export function decodeReasoning(token: unknown): string | null {
  if (typeof token !== "string") return null;
  if (token.startsWith(LEGACY_PREFIX))
    return Buffer.from(token.slice(LEGACY_PREFIX.length), "base64url").toString("utf8");
  if (!BASE64.test(token)) return null;
  const bytes = Buffer.from(token, "base64");
  if (
    bytes.length < REASONING_MAGIC.length ||
    !bytes.subarray(0, REASONING_MAGIC.length).equals(REASONING_MAGIC)
  )
    return null;
  return bytes.subarray(REASONING_MAGIC.length).toString("utf8");
}

/**
 * Joins the text of OpenAI-style content parts (string content is returned as is).
 *
 * @example
 * ```ts
 * textOf([{ type: "text", text: "a" }, { type: "text", text: "b" }]); // "ab"
 * ```
 */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  return objects(content)
    .map((p) => (typeof p.text === "string" ? p.text : ""))
    .join("");
}
