/**
 * Google Gemini `models/{model}:generateContent` and `:streamGenerateContent`: `contents` with
 * text/inlineData/fileData/functionCall/functionResponse/thought parts, `systemInstruction`,
 * `functionDeclarations` (OpenAPI-style upper-case schema types lowered), `toolConfig` modes and
 * `generationConfig`; replies as `candidates` with the same parts, streamed as SSE chunks
 * (`alt=sse`) or a JSON array.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { badField, decodeReasoning, isObject, objects, randomId } from "../json";
import { asText, functionTool, partsContent, refuseTooDeep } from "./common";
import { geminiResponse, googleErrorBody } from "./google-reply";
import { GoogleStream } from "./google-stream";
import { normalizeGeminiRequest } from "./google-wire";
import type { Family, ParsedRequest } from "./types";

/**
 * The model named in a Gemini path (`/v1beta/models/gemini-2.5-pro:generateContent` → `gemini-2.5-pro`).
 *
 * @example
 * ```ts
 * googleModelFromPath("/v1beta/models/g:streamGenerateContent"); // "g"
 * ```
 */
export function googleModelFromPath(path: string): string | null {
  const m = /\/models\/([^/:]+):/.exec(path);
  return m?.[1] ? decodeURIComponent(m[1]) : null;
}

/** Gemini schemas use OpenAPI upper-case type names (`OBJECT`); JSON Schema wants lower case. */
function lowerSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(lowerSchema);
  if (!isObject(schema)) return schema;
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(schema)) {
    out[k] = k === "type" && typeof v === "string" ? v.toLowerCase() : lowerSchema(v);
  }
  return out;
}

/**
 * The text a model is shown for a function's result. Gemini's contract for
 * `functionResponse.response`: the `output` key holds the function's output, `error` its error
 * details, and a response with neither is the output as a whole. A chat template takes a tool
 * result as text (Qwen3 prints it verbatim inside `<tool_response>`), so a response that is only
 * `{output}` becomes that output itself (a string as is, anything else as JSON), as an OpenAI-style
 * harness would have sent it; any other response (`{error}`, both keys, other keys) stays JSON, so
 * an error still reads as one. Rendering `{"output": "…"}` as JSON instead would show the model its
 * file contents and command output with every newline and quote escaped.
 *
 * @example
 * ```ts
 * functionResponseText({ output: "a\nb" }); // "a\nb": the newline is a newline, not an escape
 * functionResponseText({ error: "no such file" }); // '{"error":"no such file"}'
 * ```
 */
export function functionResponseText(response: unknown): string {
  if (isObject(response)) {
    const keys = Object.keys(response);
    if (keys.length === 1 && keys[0] === "output") {
      const output = response.output;
      return typeof output === "string" ? output : JSON.stringify(output ?? null);
    }
  }
  return JSON.stringify(response ?? {});
}

function partsOf(content: JsonObject, field: string): JsonObject[] {
  if (!Array.isArray(content.parts)) throw badField(`${field}.parts`, "required array");
  return objects(content.parts);
}

/** The `systemInstruction` (an object with parts, or a plain string) as one system message. */
function systemMessage(instruction: unknown): JsonObject | null {
  const sys = isObject(instruction)
    ? instruction
    : typeof instruction === "string"
      ? { parts: [{ text: instruction }] }
      : null;
  if (!sys) return null;
  const text = objects(sys.parts)
    .map((p) => asText(p.text))
    .join("\n");
  return text ? { role: "system", content: text } : null;
}

/**
 * Gemini answers calls by name (ids are optional): the ids given to each name's calls, so that a
 * function response without an id answers the oldest call of its name still unanswered.
 */
type PendingCallIds = Map<string, string[]>;

function convertContents(body: JsonObject): JsonObject[] {
  const out: JsonObject[] = [];
  const system = systemMessage(body.systemInstruction);
  if (system) out.push(system);
  if (!Array.isArray(body.contents)) throw badField("contents", "required array");
  const pending: PendingCallIds = new Map();
  body.contents.forEach((c, i) => {
    const field = `contents[${i}]`;
    if (!isObject(c)) throw badField(field, "must be an object");
    const parts = partsOf(c, field);
    if (c.role === "model") out.push(modelTurn(parts, pending));
    else out.push(...userTurn(parts, field, pending));
  });
  return out;
}

/**
 * A model turn as one assistant message. Its text parts are pieces of one answer (a streamed reply
 * is kept one part per chunk): joined as they were sampled, with nothing between.
 */
function modelTurn(parts: JsonObject[], pending: PendingCallIds): JsonObject {
  let reasoning = "";
  let text = "";
  const calls: JsonObject[] = [];
  for (const p of parts) {
    if (p.thought === true && typeof p.text === "string") reasoning += p.text;
    else if (typeof p.text === "string") text += p.text;
    else if (isObject(p.functionCall)) {
      const name = asText(p.functionCall.name);
      const id = typeof p.functionCall.id === "string" ? p.functionCall.id : randomId("call_");
      pending.set(name, [...(pending.get(name) ?? []), id]);
      calls.push({
        id,
        type: "function",
        function: { name, arguments: JSON.stringify(p.functionCall.args ?? {}) },
      });
    }
    if (!reasoning) reasoning = decodeReasoning(p.thoughtSignature) ?? "";
  }
  return {
    role: "assistant",
    content: text || calls.length === 0 ? text : null,
    ...(reasoning ? { reasoning_content: reasoning } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
}

/** A user turn: a tool message per function response, then one user message with the rest. */
function userTurn(parts: JsonObject[], field: string, pending: PendingCallIds): JsonObject[] {
  const out: JsonObject[] = [];
  const user: JsonObject[] = [];
  parts.forEach((p, j) => {
    if (isObject(p.functionResponse)) out.push(toolResult(p.functionResponse, pending));
    else if (typeof p.text === "string") user.push({ type: "text", text: p.text });
    else if (isObject(p.inlineData)) {
      const mime = asText(p.inlineData.mimeType, "application/octet-stream");
      user.push(mediaPart(mime, `data:${mime};base64,${asText(p.inlineData.data)}`, "file_data"));
    } else if (isObject(p.fileData)) {
      const uri = p.fileData.fileUri;
      if (typeof uri !== "string") throw badField(`${field}.parts[${j}].fileData.fileUri`, "required string");
      user.push(mediaPart(asText(p.fileData.mimeType), uri, "file_url"));
    }
  });
  if (user.length > 0) out.push({ role: "user", content: partsContent(user) });
  return out;
}

/** A function response as a tool message, answering the call it names by id or else by name. */
function toolResult(response: JsonObject, pending: PendingCallIds): JsonObject {
  const name = asText(response.name);
  const queue = pending.get(name) ?? [];
  const id = typeof response.id === "string" ? response.id : (queue.shift() ?? randomId("call_"));
  pending.set(
    name,
    queue.filter((x) => x !== id),
  );
  return { role: "tool", tool_call_id: id, content: functionResponseText(response.response) };
}

/** Inline data or a file reference as a content part: an image part for images, else a file. */
function mediaPart(mime: string, url: string, fileKey: "file_data" | "file_url"): JsonObject {
  return mime.startsWith("image/")
    ? { type: "image_url", image_url: { url } }
    : { type: "file", file: { [fileKey]: url } };
}

/**
 * Gemini request body → internal chat request (also used by `countTokens`).
 *
 * @example
 * ```ts
 * googleToChat({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }, "gemini-2.5-pro");
 * ```
 */
export function googleToChat(raw: unknown, model: string | null): JsonObject {
  refuseTooDeep(raw);
  const body = normalizeGeminiRequest(raw);
  if (!isObject(body)) throw badField("(body)", "must be a JSON object");
  const chat: JsonObject = { messages: convertContents(body) };
  if (model) chat.model = model;
  const tools = objects(body.tools).flatMap((t) => objects(t.functionDeclarations));
  if (tools.length > 0) {
    chat.tools = tools.map((f) =>
      functionTool(
        f,
        isObject(f.parametersJsonSchema)
          ? f.parametersJsonSchema
          : (lowerSchema(f.parameters ?? { type: "object", properties: {} }) as JsonObject),
      ),
    );
  }
  const fcc =
    isObject(body.toolConfig) && isObject(body.toolConfig.functionCallingConfig)
      ? body.toolConfig.functionCallingConfig
      : null;
  if (fcc) {
    const allowed = Array.isArray(fcc.allowedFunctionNames) ? fcc.allowedFunctionNames : [];
    if (fcc.mode === "NONE") chat.tool_choice = "none";
    else if (fcc.mode === "ANY")
      chat.tool_choice =
        allowed.length === 1 ? { type: "function", function: { name: allowed[0] } } : "required";
    else if (fcc.mode === "AUTO" || fcc.mode === "VALIDATED") chat.tool_choice = "auto";
  }
  const gc = isObject(body.generationConfig) ? body.generationConfig : {};
  if (gc.candidateCount != null && gc.candidateCount !== 1)
    throw badField("generationConfig.candidateCount", "only 1 is supported");
  const map: Array<[string, string]> = [
    ["temperature", "temperature"],
    ["topP", "top_p"],
    ["topK", "top_k"],
    ["maxOutputTokens", "max_tokens"],
    ["seed", "seed"],
    ["presencePenalty", "presence_penalty"],
    ["frequencyPenalty", "frequency_penalty"],
  ];
  for (const [from, to] of map) if (gc[from] != null) chat[to] = gc[from];
  if (Array.isArray(gc.stopSequences) && gc.stopSequences.length > 0) chat.stop = gc.stopSequences;
  if (isObject(gc.thinkingConfig) && gc.thinkingConfig.thinkingBudget === 0)
    chat.chat_template_kwargs = { enable_thinking: false };
  return chat;
}

/**
 * The Google Gemini family.
 *
 * @example
 * ```ts
 * const req = google.parse(body, { path: "/v1beta/models/g:generateContent", query, headers });
 * ```
 */
export const google: Family = {
  api: "google",
  parse(raw, ctx): ParsedRequest {
    refuseTooDeep(raw);
    const body = normalizeGeminiRequest(raw);
    const model =
      googleModelFromPath(ctx.path) ?? (isObject(body) && typeof body.model === "string" ? body.model : null);
    const chat = googleToChat(body, model);
    const gc = isObject(body) && isObject(body.generationConfig) ? body.generationConfig : {};
    return {
      chat,
      stream: ctx.path.includes(":streamGenerateContent"),
      requestedModel: model,
      reply: {
        sse: ctx.query.get("alt") === "sse",
        includeThoughts: isObject(gc.thinkingConfig) && gc.thinkingConfig.includeThoughts === true,
      },
    };
  },
  respond: geminiResponse,
  stream: (req, meta) => new GoogleStream(req, meta),
  errorBody: googleErrorBody,
};
