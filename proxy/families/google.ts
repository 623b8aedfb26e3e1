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
import {
  badField,
  decodeReasoning,
  encodeReasoning,
  isObject,
  objects,
  parseArguments,
  randomId,
} from "../json";
import {
  asText,
  choiceOf,
  messageOf,
  partsContent,
  refuseTooDeep,
  sse,
  toolCallsOf,
  usageOf,
} from "./common";
import { normalizeGeminiRequest } from "./google-wire";
import type { DeltaEvent, ErrorInfo, Family, ParsedRequest, StreamWriter } from "./types";

const STATUS_NAMES: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHENTICATED",
  403: "PERMISSION_DENIED",
  404: "NOT_FOUND",
  413: "INVALID_ARGUMENT",
  429: "RESOURCE_EXHAUSTED",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE",
  504: "DEADLINE_EXCEEDED",
};

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

function convertContents(body: JsonObject): JsonObject[] {
  const out: JsonObject[] = [];
  const sys = isObject(body.systemInstruction)
    ? body.systemInstruction
    : typeof body.systemInstruction === "string"
      ? { parts: [{ text: body.systemInstruction }] }
      : null;
  if (sys) {
    const text = objects(sys.parts)
      .map((p) => asText(p.text))
      .join("\n");
    if (text) out.push({ role: "system", content: text });
  }
  if (!Array.isArray(body.contents)) throw badField("contents", "required array");
  // Gemini answers calls by name (ids are optional): remember the ids given to each name's calls.
  const pendingIds = new Map<string, string[]>();
  body.contents.forEach((c, i) => {
    const field = `contents[${i}]`;
    if (!isObject(c)) throw badField(field, "must be an object");
    const parts = partsOf(c, field);
    if (c.role === "model") {
      let reasoning = "";
      let text = "";
      const calls: JsonObject[] = [];
      // A model turn's text parts are pieces of one answer (a streamed reply is kept one part per
      // chunk): joined as they were sampled, with nothing between.
      for (const p of parts) {
        if (p.thought === true && typeof p.text === "string") reasoning += p.text;
        else if (typeof p.text === "string") text += p.text;
        else if (isObject(p.functionCall)) {
          const name = asText(p.functionCall.name);
          const id = typeof p.functionCall.id === "string" ? p.functionCall.id : randomId("call_");
          pendingIds.set(name, [...(pendingIds.get(name) ?? []), id]);
          calls.push({
            id,
            type: "function",
            function: { name, arguments: JSON.stringify(p.functionCall.args ?? {}) },
          });
        }
        if (!reasoning) reasoning = decodeReasoning(p.thoughtSignature) ?? "";
      }
      out.push({
        role: "assistant",
        content: text || calls.length === 0 ? text : null,
        ...(reasoning ? { reasoning_content: reasoning } : {}),
        ...(calls.length > 0 ? { tool_calls: calls } : {}),
      });
      return;
    }
    const user: JsonObject[] = [];
    parts.forEach((p, j) => {
      if (isObject(p.functionResponse)) {
        const name = asText(p.functionResponse.name);
        const queue = pendingIds.get(name) ?? [];
        const id =
          typeof p.functionResponse.id === "string"
            ? p.functionResponse.id
            : (queue.shift() ?? randomId("call_"));
        pendingIds.set(
          name,
          queue.filter((x) => x !== id),
        );
        out.push({
          role: "tool",
          tool_call_id: id,
          content: functionResponseText(p.functionResponse.response),
        });
      } else if (typeof p.text === "string") user.push({ type: "text", text: p.text });
      else if (isObject(p.inlineData)) {
        const mime = asText(p.inlineData.mimeType, "application/octet-stream");
        const url = `data:${mime};base64,${asText(p.inlineData.data)}`;
        user.push(
          mime.startsWith("image/")
            ? { type: "image_url", image_url: { url } }
            : { type: "file", file: { file_data: url } },
        );
      } else if (isObject(p.fileData)) {
        const uri = p.fileData.fileUri;
        if (typeof uri !== "string")
          throw badField(`${field}.parts[${j}].fileData.fileUri`, "required string");
        const mime = asText(p.fileData.mimeType);
        user.push(
          mime.startsWith("image/")
            ? { type: "image_url", image_url: { url: uri } }
            : { type: "file", file: { file_url: uri } },
        );
      }
    });
    if (user.length > 0) {
      out.push({
        role: "user",
        content: partsContent(user),
      });
    }
  });
  return out;
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
    chat.tools = tools.map((f) => ({
      type: "function",
      function: {
        name: f.name,
        ...(typeof f.description === "string" ? { description: f.description } : {}),
        parameters: isObject(f.parametersJsonSchema)
          ? f.parametersJsonSchema
          : (lowerSchema(f.parameters ?? { type: "object", properties: {} }) as JsonObject),
      },
    }));
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

function finishReason(completion: JsonObject): string {
  return choiceOf(completion).finish_reason === "length" ? "MAX_TOKENS" : "STOP";
}

function usageMetadata(completion: JsonObject): JsonObject {
  const u = usageOf(completion);
  return {
    promptTokenCount: u.prompt,
    candidatesTokenCount: u.completion,
    totalTokenCount: u.prompt + u.completion,
    cachedContentTokenCount: u.cached,
  };
}

function answerParts(completion: JsonObject, includeThoughts: boolean): JsonObject[] {
  const message = messageOf(completion);
  const parts: JsonObject[] = [];
  const reasoning = typeof message.reasoning_content === "string" ? message.reasoning_content : "";
  if (reasoning && includeThoughts) parts.push({ text: reasoning, thought: true });
  if (typeof message.content === "string" && message.content) parts.push({ text: message.content });
  for (const c of toolCallsOf(message))
    parts.push({ functionCall: { id: c.id, name: c.name, args: parseArguments(c.arguments) } });
  // Thinking models return a signature the client must send back; ours carries the reasoning itself.
  if (reasoning && parts.length > 0)
    parts[parts.length - 1] = { ...parts.at(-1), thoughtSignature: encodeReasoning(reasoning) };
  return parts;
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
  respond(completion, req) {
    return {
      candidates: [
        {
          content: { role: "model", parts: answerParts(completion, req.reply.includeThoughts === true) },
          finishReason: finishReason(completion),
          index: 0,
        },
      ],
      usageMetadata: usageMetadata(completion),
      modelVersion: req.requestedModel ?? completion.model ?? null,
      responseId: String(completion.id ?? randomId("")),
    };
  },
  stream: googleStream,
  errorBody: (e: ErrorInfo) => ({
    error: {
      code: e.status,
      message: e.message,
      status: STATUS_NAMES[e.status] ?? (e.status >= 500 ? "INTERNAL" : "FAILED_PRECONDITION"),
      details: [{ reason: e.code }],
    },
  }),
};

/** One chunk per delta (`data: {candidates…}` with `alt=sse`, else elements of one JSON array). */
function googleStream(req: ParsedRequest, meta: { id: string; created: number }): StreamWriter {
  const asSse = req.reply.sse === true;
  let first = true;
  const frame = (body: JsonObject): string => {
    if (asSse) return sse(body);
    const prefix = first ? "[" : ",\r\n";
    first = false;
    return prefix + JSON.stringify(body);
  };
  const chunk = (parts: JsonObject[], extra: JsonObject = {}) =>
    frame({
      candidates: [{ content: { role: "model", parts }, index: 0, ...extra }],
      modelVersion: req.requestedModel,
      responseId: meta.id,
    });
  let reasoning = "";
  let signed = false;
  return {
    contentType: asSse ? "text/event-stream" : "application/json",
    start: () => "",
    delta(ev: DeltaEvent) {
      if (ev.kind === "reasoning") {
        reasoning += ev.text;
        return req.reply.includeThoughts === true ? chunk([{ text: ev.text, thought: true }]) : "";
      }
      if (ev.kind === "text") return chunk([{ text: ev.text }]);
      const part: JsonObject = {
        functionCall: { id: ev.id, name: ev.name, args: parseArguments(ev.arguments) },
      };
      // As Gemini does: the signature rides on the first call (clients keep call parts, not empty ones).
      if (reasoning && !signed) part.thoughtSignature = encodeReasoning(reasoning);
      signed ||= reasoning !== "";
      return chunk([part]);
    },
    finish(completion) {
      // Never an empty `parts`: google-genai's chats count a chunk without parts as an invalid turn
      // and drop it (and its question) from the history.
      const parts: JsonObject[] = [
        { text: "", ...(reasoning && !signed ? { thoughtSignature: encodeReasoning(reasoning) } : {}) },
      ];
      const body = frame({
        candidates: [{ content: { role: "model", parts }, finishReason: finishReason(completion), index: 0 }],
        usageMetadata: usageMetadata(completion),
        modelVersion: req.requestedModel,
        responseId: meta.id,
      });
      return asSse ? body : `${body}]`;
    },
    error: (e) =>
      asSse ? sse(google.errorBody(e)) : `${first ? "[" : ","}${JSON.stringify(google.errorBody(e))}]`,
  };
}
