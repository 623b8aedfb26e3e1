/**
 * OpenAI Responses (`POST /v1/responses`): `instructions` + `input` items (messages,
 * function_call, function_call_output, reasoning with `encrypted_content`, custom tool calls) to
 * the internal chat form; replies as a `response` object with reasoning/message/function_call output
 * items and the typed SSE events ending in `response.completed`.
 *
 * The proxy is stateless: `previous_response_id` is refused (harnesses that run against local
 * models send the whole history with `store: false`).
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { openAiError } from "../errors";
import { badField, decodeReasoning, isObject, objects, randomId } from "../json";
import { asText, functionTool, mergeSystem, partsContent, refuseTooDeep } from "./common";
import { responseObject } from "./responses-output";
import { ResponsesStream } from "./responses-stream";
import type { ErrorInfo, Family, ParsedRequest } from "./types";

function parts(content: unknown, field: string): string | JsonObject[] {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw badField(field, "must be a string or a list of content parts");
  const out: JsonObject[] = [];
  objects(content).forEach((p, i) => {
    if (p.type === "input_text" || p.type === "output_text" || p.type === "text")
      out.push({ type: "text", text: asText(p.text) });
    else if (p.type === "input_image") {
      const url = typeof p.image_url === "string" ? p.image_url : null;
      if (!url) throw badField(`${field}[${i}].image_url`, "required string (file ids are not supported)");
      out.push({ type: "image_url", image_url: { url, ...(p.detail ? { detail: p.detail } : {}) } });
    } else if (p.type === "input_file") {
      out.push({
        type: "file",
        file: {
          ...(p.file_data ? { file_data: p.file_data } : {}),
          ...(p.filename ? { filename: p.filename } : {}),
          ...(p.file_url ? { file_url: p.file_url } : {}),
        },
      });
    } else if (p.type === "refusal") out.push({ type: "text", text: asText(p.refusal) });
  });
  return partsContent(out);
}

function reasoningText(item: JsonObject): string {
  const fromContent = objects(item.content)
    .map((c) => asText(c.text))
    .join("");
  if (fromContent) return fromContent;
  const decoded = decodeReasoning(item.encrypted_content);
  if (decoded !== null) return decoded;
  return objects(item.summary)
    .map((s) => asText(s.text))
    .join("\n");
}

function convertInput(body: JsonObject): JsonObject[] {
  const out: JsonObject[] = [];
  if (typeof body.instructions === "string" && body.instructions)
    out.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    out.push({ role: "user", content: body.input });
    return out;
  }
  if (!Array.isArray(body.input)) throw badField("input", "required string or array");
  let pendingReasoning = "";
  // The assistant message being assembled from consecutive assistant/function_call items.
  let assistant: JsonObject | null = null;
  const flush = () => {
    if (assistant) out.push(assistant);
    assistant = null;
  };
  const ensureAssistant = (): JsonObject => {
    if (!assistant) {
      assistant = { role: "assistant", content: null };
      if (pendingReasoning) assistant.reasoning_content = pendingReasoning;
      pendingReasoning = "";
    }
    return assistant;
  };
  body.input.forEach((item, i) => {
    const field = `input[${i}]`;
    if (!isObject(item)) throw badField(field, "must be an object");
    const type = item.type ?? (item.role !== undefined ? "message" : undefined);
    if (type === "message") {
      if (typeof item.role !== "string") throw badField(`${field}.role`, "required string");
      const content = parts(item.content, `${field}.content`);
      if (item.role === "assistant") {
        const a = ensureAssistant();
        // The answer as the proxy returned it (one output_text part, or its pieces).
        const text =
          typeof content === "string"
            ? content
            : content.map((p) => (p.type === "text" ? String(p.text) : "")).join("");
        a.content = `${typeof a.content === "string" ? a.content : ""}${text}`;
        return;
      }
      flush();
      out.push({ role: item.role, content });
    } else if (type === "reasoning") {
      flush();
      pendingReasoning += reasoningText(item);
    } else if (type === "function_call" || type === "custom_tool_call") {
      const a = ensureAssistant();
      const calls = Array.isArray(a.tool_calls) ? a.tool_calls : [];
      const args =
        type === "custom_tool_call"
          ? JSON.stringify({ input: asText(item.input) })
          : asText(item.arguments, "{}");
      if (typeof item.call_id !== "string") throw badField(`${field}.call_id`, "required string");
      calls.push({
        id: item.call_id,
        type: "function",
        function: { name: asText(item.name), arguments: args },
      });
      a.tool_calls = calls;
    } else if (type === "function_call_output" || type === "custom_tool_call_output") {
      flush();
      if (typeof item.call_id !== "string") throw badField(`${field}.call_id`, "required string");
      const output = typeof item.output === "string" ? item.output : parts(item.output, `${field}.output`);
      out.push({ role: "tool", tool_call_id: item.call_id, content: output });
    } else if (type === "item_reference") {
      throw badField(`${field}.type`, "item_reference needs stored responses; send the items (store: false)");
    }
    // Other item kinds (web_search_call, …) have no chat equivalent and are dropped.
  });
  flush();
  if (pendingReasoning) out.push({ role: "assistant", content: "", reasoning_content: pendingReasoning });
  return out;
}

function convertTools(body: JsonObject, customTools: Set<string>): JsonObject[] {
  const tools: JsonObject[] = [];
  objects(body.tools).forEach((t) => {
    if (t.type === "function") {
      const parameters = isObject(t.parameters) ? t.parameters : { type: "object", properties: {} };
      tools.push(functionTool(t, parameters, typeof t.strict === "boolean" ? { strict: t.strict } : {}));
    } else if (t.type === "custom" && typeof t.name === "string") {
      // A free-form tool becomes a function with one string argument; the reply turns it back.
      customTools.add(t.name);
      tools.push(
        functionTool(t, { type: "object", properties: { input: { type: "string" } }, required: ["input"] }),
      );
    }
  });
  return tools;
}

/**
 * The OpenAI Responses family.
 *
 * @example
 * ```ts
 * const req = responses.parse({ model: "m", input: "hi" }, ctx);
 * ```
 */
export const responses: Family = {
  api: "openai_responses",
  parse(body): ParsedRequest {
    refuseTooDeep(body);
    if (!isObject(body)) throw badField("(body)", "must be a JSON object");
    if (body.previous_response_id != null) {
      throw badField(
        "previous_response_id",
        "not supported: the proxy keeps no responses; send the full input with store: false",
      );
    }
    const customTools = new Set<string>();
    const tools = convertTools(body, customTools);
    const chat: JsonObject = { messages: mergeSystem(convertInput(body)) };
    if (typeof body.model === "string") chat.model = body.model;
    if (body.max_output_tokens != null) chat.max_tokens = body.max_output_tokens;
    for (const key of ["temperature", "top_p", "parallel_tool_calls"] as const)
      if (body[key] != null) chat[key] = body[key];
    if (tools.length > 0) chat.tools = tools;
    const tc = body.tool_choice;
    if (typeof tc === "string") chat.tool_choice = tc;
    else if (isObject(tc) && typeof tc.name === "string")
      chat.tool_choice = { type: "function", function: { name: tc.name } };
    if (isObject(body.reasoning) && body.reasoning.effort === "none")
      chat.chat_template_kwargs = { enable_thinking: false };
    const include = Array.isArray(body.include) ? body.include : [];
    return {
      chat,
      stream: body.stream === true,
      requestedModel: typeof body.model === "string" ? body.model : null,
      reply: {
        customTools: [...customTools],
        encrypted: include.includes("reasoning.encrypted_content"),
        echo: {
          instructions: body.instructions ?? null,
          tools: Array.isArray(body.tools) ? body.tools : [],
          tool_choice: body.tool_choice ?? "auto",
          parallel_tool_calls: body.parallel_tool_calls ?? true,
          temperature: body.temperature ?? null,
          top_p: body.top_p ?? null,
          max_output_tokens: body.max_output_tokens ?? null,
          store: body.store ?? false,
          reasoning: body.reasoning ?? null,
          text: body.text ?? { format: { type: "text" } },
          metadata: body.metadata ?? {},
        },
      },
    };
  },
  respond: (completion, req) =>
    responseObject(completion, req, String(completion.id ?? randomId("")), "completed"),
  stream: (req, meta) => new ResponsesStream(req, meta),
  errorBody: (e: ErrorInfo) => openAiError(e.message, e.type, e.code, e.param) as unknown as JsonObject,
};
