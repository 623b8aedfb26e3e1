/**
 * Gemini requests as clients really send them, brought to the one form the family reads:
 *
 * - Gemini's API speaks proto3 JSON, whose parsers accept every field under its lowerCamelCase
 *   JSON name or under its original snake_case proto name. Google's Python SDK relies on that: it
 *   sends function declarations and parts of `generationConfig` as it dumps them
 *   (`parameters_json_schema`, `thinkingConfig: {include_thoughts}`, Schema's `max_items`, …).
 * - proto3 JSON writes `bytes` fields in base64, standard or URL-safe; Pydantic (google-genai's
 *   models) writes URL-safe, which a `data:` URL and engines do not accept: `inlineData.data` is
 *   brought to standard base64.
 * - A streamed answer comes back as one `model` content per chunk (google-genai's chat history
 *   keeps each chunk), which is one turn: consecutive `model` contents are joined.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { isObject } from "../json";

/**
 * Free-form JSON fields (proto `Struct`/`Value`): their content is the caller's, kept verbatim —
 * a tool argument or a JSON Schema property named `file_path` must stay `file_path`.
 */
const VERBATIM = new Set([
  "args",
  "response",
  "parametersJsonSchema",
  "responseJsonSchema",
  "default",
  "example",
  "labels",
]);

/** Map fields (`map<string, Schema>`): the keys are names chosen by the caller, the values messages. */
const MAPS = new Set(["properties"]);

/**
 * The proto3 JSON name of a field: underscores dropped, the character after each upper-cased.
 *
 * @example
 * ```ts
 * jsonName("thought_signature"); // "thoughtSignature"
 * ```
 */
export function jsonName(field: string): string {
  return field.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/**
 * Standard, padded base64 of a base64 string in either alphabet.
 *
 * @example
 * ```ts
 * standardBase64("-_8"); // "+/8="
 * ```
 */
export function standardBase64(data: string): string {
  const std = data.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  return std + "=".repeat((4 - (std.length % 4)) % 4);
}

function camel(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camel);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(value)) {
    const name = jsonName(k);
    // Both spellings of one field: the JSON name, as the client's own serialiser wrote it, wins.
    if (name !== k && Object.hasOwn(value, name)) continue;
    if (VERBATIM.has(name)) out[name] = v;
    else if (MAPS.has(name) && isObject(v))
      out[name] = Object.fromEntries(Object.entries(v).map(([key, schema]) => [key, camel(schema)]));
    else out[name] = camel(v);
  }
  const blob = out.inlineData;
  if (isObject(blob) && typeof blob.data === "string")
    out.inlineData = { ...blob, data: standardBase64(blob.data) };
  return out;
}

/** Consecutive `model` contents (a streamed turn, one content per chunk) as one content. */
function joinModelRuns(contents: unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const c of contents) {
    const prev = out.at(-1);
    if (isObject(c) && c.role === "model" && isObject(prev) && prev.role === "model") {
      if (Array.isArray(prev.parts) && Array.isArray(c.parts))
        out[out.length - 1] = { ...prev, parts: [...prev.parts, ...c.parts] };
      else out.push(c);
    } else out.push(c);
  }
  return out;
}

/**
 * A Gemini request body with every message field under its lowerCamelCase name (free-form JSON
 * values and map keys untouched) and each streamed model turn in one content; anything that is
 * not an object is returned as is.
 *
 * @example
 * ```ts
 * normalizeGeminiRequest({ generationConfig: { thinking_config: { include_thoughts: true } } });
 * // { generationConfig: { thinkingConfig: { includeThoughts: true } } }
 * ```
 */
export function normalizeGeminiRequest(body: unknown): unknown {
  if (!isObject(body)) return body;
  const out = camel(body) as JsonObject;
  if (Array.isArray(out.contents)) out.contents = joinModelRuns(out.contents);
  return out;
}
