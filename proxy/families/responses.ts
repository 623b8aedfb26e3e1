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
  type FlatToolCall,
  mergeSystem,
  messageOf,
  partsContent,
  refuseTooDeep,
  sse,
  toolCallsOf,
  usageOf,
} from "./common";
import type { DeltaEvent, ErrorInfo, Family, ParsedRequest, StreamWriter } from "./types";

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
      tools.push({
        type: "function",
        function: {
          name: t.name,
          ...(typeof t.description === "string" ? { description: t.description } : {}),
          parameters: isObject(t.parameters) ? t.parameters : { type: "object", properties: {} },
          ...(typeof t.strict === "boolean" ? { strict: t.strict } : {}),
        },
      });
    } else if (t.type === "custom" && typeof t.name === "string") {
      // A free-form tool becomes a function with one string argument; the reply turns it back.
      customTools.add(t.name);
      tools.push({
        type: "function",
        function: {
          name: t.name,
          ...(typeof t.description === "string" ? { description: t.description } : {}),
          parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"] },
        },
      });
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
  stream: responsesStream,
  errorBody: (e: ErrorInfo) => openAiError(e.message, e.type, e.code, e.param) as unknown as JsonObject,
};

/**
 * A reasoning output item as OpenAI's own API returns one: the text in `summary`, the opaque
 * `encrypted_content` when asked for, and no `content`. A `content: [{type: "reasoning_text"}]`
 * copy is what Copilot CLI reads as a second, visible answer: it echoed it back as an assistant
 * message repeating the reasoning, so the model saw it twice and every turn was
 * `history_rewritten`. Codex sends the item back as it got it, with or without `content`.
 */
function reasoningItem(id: string, text: string, encrypted: boolean): JsonObject {
  return {
    type: "reasoning",
    id,
    summary: [{ type: "summary_text", text }],
    ...(encrypted ? { encrypted_content: encodeReasoning(text) } : {}),
  };
}

function messageItem(id: string, text: string): JsonObject {
  return {
    type: "message",
    id,
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text, annotations: [], logprobs: [] }],
  };
}

function callItem(id: string, call: FlatToolCall, custom: boolean): JsonObject {
  return custom
    ? {
        type: "custom_tool_call",
        id,
        call_id: call.id,
        name: call.name,
        input: String(parseArguments(call.arguments).input ?? ""),
        status: "completed",
      }
    : {
        type: "function_call",
        id,
        call_id: call.id,
        name: call.name,
        arguments: call.arguments,
        status: "completed",
      };
}

function responseObject(
  completion: JsonObject,
  req: ParsedRequest,
  id: string,
  status: string,
  ids?: string[],
): JsonObject {
  const message = messageOf(completion);
  const custom = new Set(Array.isArray(req.reply.customTools) ? (req.reply.customTools as string[]) : []);
  const output: JsonObject[] = [];
  let n = 0;
  const nextId = (prefix: string) => ids?.[n++] ?? randomId(prefix);
  if (typeof message.reasoning_content === "string" && message.reasoning_content) {
    output.push(reasoningItem(nextId("rs_"), message.reasoning_content, req.reply.encrypted === true));
  }
  if (typeof message.content === "string" && message.content)
    output.push(messageItem(nextId("msg_"), message.content));
  for (const c of toolCallsOf(message)) output.push(callItem(nextId("fc_"), c, custom.has(c.name)));
  const u = usageOf(completion);
  const truncated = choiceOf(completion).finish_reason === "length";
  const echo = isObject(req.reply.echo) ? req.reply.echo : {};
  return {
    id: `resp_${id}`,
    object: "response",
    created_at: typeof completion.created === "number" ? completion.created : Math.floor(Date.now() / 1000),
    status: status === "completed" && truncated ? "incomplete" : status,
    error: null,
    incomplete_details: status === "completed" && truncated ? { reason: "max_output_tokens" } : null,
    model: req.requestedModel ?? completion.model ?? null,
    output,
    usage: {
      input_tokens: u.prompt,
      // The SDKs type both details as required (openai-python 3.x: `cache_write_tokens`); the engine
      // radix cache fills as a side effect, so no input token is ever counted as a cache write.
      input_tokens_details: { cached_tokens: u.cached, cache_write_tokens: 0 },
      output_tokens: u.completion,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: u.prompt + u.completion,
    },
    ...echo,
  };
}

/**
 * Typed events: response.created / in_progress, then per output item `output_item.added`, its
 * part/text/arguments deltas and `…done` events, `output_item.done`, and `response.completed`.
 */
function responsesStream(req: ParsedRequest, meta: { id: string; created: number }): StreamWriter {
  let seq = 0;
  let index = -1;
  const ids: string[] = [];
  let open: { kind: "reasoning" | "text"; id: string; text: string } | null = null;
  const ev = (type: string, data: JsonObject) => sse({ type, sequence_number: seq++, ...data }, type);
  const shell = (status: string): JsonObject => ({
    ...responseObject({ id: meta.id, created: meta.created, choices: [] }, req, meta.id, status),
    output: [],
    usage: null,
  });
  const close = (): string => {
    if (!open) return "";
    const o = open;
    open = null;
    if (o.kind === "text") {
      const part = { type: "output_text", text: o.text, annotations: [], logprobs: [] };
      return (
        ev("response.output_text.done", {
          item_id: o.id,
          output_index: index,
          content_index: 0,
          text: o.text,
          logprobs: [],
        }) +
        ev("response.content_part.done", { item_id: o.id, output_index: index, content_index: 0, part }) +
        ev("response.output_item.done", { output_index: index, item: messageItem(o.id, o.text) })
      );
    }
    return (
      ev("response.reasoning_summary_text.done", {
        item_id: o.id,
        output_index: index,
        summary_index: 0,
        text: o.text,
      }) +
      ev("response.reasoning_summary_part.done", {
        item_id: o.id,
        output_index: index,
        summary_index: 0,
        part: { type: "summary_text", text: o.text },
      }) +
      ev("response.output_item.done", {
        output_index: index,
        item: reasoningItem(o.id, o.text, req.reply.encrypted === true),
      })
    );
  };
  const custom = new Set(Array.isArray(req.reply.customTools) ? (req.reply.customTools as string[]) : []);
  return {
    contentType: "text/event-stream",
    start: () =>
      ev("response.created", { response: shell("in_progress") }) +
      ev("response.in_progress", { response: shell("in_progress") }),
    delta(d: DeltaEvent) {
      let out = "";
      if (d.kind === "reasoning" || d.kind === "text") {
        if (!open || open.kind !== d.kind) {
          out += close();
          index++;
          const id = randomId(d.kind === "text" ? "msg_" : "rs_");
          ids.push(id);
          open = { kind: d.kind, id, text: "" };
          if (d.kind === "text") {
            out += ev("response.output_item.added", {
              output_index: index,
              item: { type: "message", id, status: "in_progress", role: "assistant", content: [] },
            });
            out += ev("response.content_part.added", {
              item_id: id,
              output_index: index,
              content_index: 0,
              part: { type: "output_text", text: "", annotations: [], logprobs: [] },
            });
          } else {
            out += ev("response.output_item.added", {
              output_index: index,
              item: { type: "reasoning", id, summary: [] },
            });
            out += ev("response.reasoning_summary_part.added", {
              item_id: id,
              output_index: index,
              summary_index: 0,
              part: { type: "summary_text", text: "" },
            });
          }
        }
        const o = open!;
        o.text += d.text;
        return (
          out +
          (d.kind === "text"
            ? ev("response.output_text.delta", {
                item_id: o.id,
                output_index: index,
                content_index: 0,
                delta: d.text,
                logprobs: [],
              })
            : ev("response.reasoning_summary_text.delta", {
                item_id: o.id,
                output_index: index,
                summary_index: 0,
                delta: d.text,
              }))
        );
      }
      out += close();
      index++;
      const id = randomId("fc_");
      ids.push(id);
      const isCustom = custom.has(d.name);
      const item = callItem(id, d, isCustom);
      out += ev("response.output_item.added", {
        output_index: index,
        item: { ...item, status: "in_progress", ...(isCustom ? { input: "" } : { arguments: "" }) },
      });
      if (isCustom) {
        const input = String(item.input);
        out += ev("response.custom_tool_call_input.delta", {
          item_id: id,
          output_index: index,
          delta: input,
        });
        out += ev("response.custom_tool_call_input.done", { item_id: id, output_index: index, input });
      } else {
        out += ev("response.function_call_arguments.delta", {
          item_id: id,
          output_index: index,
          delta: d.arguments,
        });
        out += ev("response.function_call_arguments.done", {
          item_id: id,
          output_index: index,
          arguments: d.arguments,
        });
      }
      return out + ev("response.output_item.done", { output_index: index, item });
    },
    finish(completion) {
      const out = close();
      const response = responseObject(completion, req, meta.id, "completed", ids);
      const type = response.status === "incomplete" ? "response.incomplete" : "response.completed";
      return out + ev(type, { response });
    },
    error: (e) => ev("error", { code: e.code, message: e.message, param: e.param }),
  };
}
