/**
 * `POST /v1/chat/completions` in SGLang's ≥ 0.5.13 shape: the messages are rendered with the real
 * chat template (as SGLang's `_apply_jinja_template` prepares them), the output is split by the
 * `qwen3` reasoning parser and the `qwen25` tool-call parser (the served family's, `deepseekv3`
 * for DeepSeek V3: `sim/dialects/`), and the TITO extensions
 * (`return_prompt_token_ids`, `return_meta_info`, `input_ids`) are honoured, non-streaming only;
 * `return_routed_experts` (MoE routing replay) answers in `sglext`, streaming or not.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { sglangToolDumps } from "../tokenizer/chat-tokenizer";
import { ChatRequest, logprobContent } from "./chat-request";
import { type EngineResult, SIMULATOR_ID, type SimEngineCore } from "./engine";
import { checkImages, checkSamplingParams, routingKeyOf, stopList } from "./generate-api";
import { HttpError, parseBody, sendJson } from "./http";
import { imagesFromMessages } from "./images";
import { parseToolCalls, separateReasoning } from "./output-parsers";
import { PriorityDisabledError, readPriority, requestPriority } from "./priority";
import { readRoutedExpertsStartLen, routedExpertsStartViolation } from "./routed-experts";
import { checkVllmSampling, vllmOutputBudget } from "./vllm-contract";
import { type SimFlavor, sendVllm } from "./vllm-shape";

/**
 * Which server the sim answers as: SGLang ≥ 0.5.13 (default), SGLang 0.5.10 with Polar's token
 * patch (`input_token_ids` and `logprobs.content[].token_id` whenever `logprobs: true`), vLLM
 * (main as of 2026-11) with `return_token_ids` (also on streams) and `message.reasoning`, or vLLM
 * 0.10.1, which predates `return_token_ids` and ignores it (see `vllm-contract.ts`).
 */
export type { SimFlavor };

/**
 * True for the flavors that answer as vLLM.
 *
 * @example
 * ```ts
 * isVllmFlavor("vllm-0.10.1"); // true
 * ```
 */
export function isVllmFlavor(flavor: SimFlavor): flavor is "vllm" | "vllm-0.10.1" {
  return flavor === "vllm" || flavor === "vllm-0.10.1";
}

/** The TITO extensions SGLang refuses with `stream: true`. */
const NON_STREAMING_FLAGS = ["return_prompt_token_ids", "return_meta_info"] as const;

/**
 * Serves one chat completion request (JSON reply, or SSE when `stream: true`).
 *
 * @example
 * ```ts
 * await handleChatCompletion(engine, "Qwen/Qwen3-0.6B", req, res, body);
 * ```
 */
export async function handleChatCompletion(
  engine: SimEngineCore,
  servedModel: string,
  req: IncomingMessage,
  res: ServerResponse,
  raw: unknown,
  flavor: SimFlavor = "sglang",
  signal?: AbortSignal,
): Promise<void> {
  const vllm = isVllmFlavor(flavor);
  // A priority that is no integer fails the request model's validation, on both servers.
  const requestedPriority = readPriority(
    raw && typeof raw === "object" ? (raw as Record<string, unknown>).priority : undefined,
  );
  // vLLM validates the sampling values before anything else, in its own words.
  if (vllm) checkVllmSampling(raw);
  const body = parseBody(ChatRequest, raw);
  // SGLang's request model types `routed_experts_start_len` as an int; vLLM has no such field.
  const routedStart = vllm ? { value: 0 } : readRoutedExpertsStartLen(body.routed_experts_start_len);
  if ("error" in routedStart) throw new HttpError(400, routedStart.error);
  const wantsRoutes = !vllm && (body.return_routed_experts ?? false);
  if (!vllm) {
    // SGLang's chat endpoint builds the same SamplingParams and verify() refuses the same values
    // (SGLang 0.5 / main as of 2026-11); vLLM has bounds of its own.
    const r = raw as Record<string, unknown>;
    checkSamplingParams(
      {
        temperature: r.temperature,
        top_p: r.top_p,
        top_k: r.top_k,
        min_p: r.min_p,
        frequency_penalty: r.frequency_penalty,
        presence_penalty: r.presence_penalty,
        repetition_penalty: r.repetition_penalty,
        min_new_tokens: r.min_tokens,
        max_new_tokens: r.max_completion_tokens ?? r.max_tokens,
      },
      engine.tokenizer.vocabSize,
    );
  }
  if (vllm) {
    // vLLM reads `reasoning` on earlier turns; a `reasoning_content` it does not know is ignored.
    body.messages = body.messages.map(({ reasoning, reasoning_content: _r, ...m }) => ({
      ...m,
      ...(reasoning != null ? { reasoning_content: reasoning } : {}),
    }));
  }
  if (body.stream && flavor === "sglang") {
    for (const name of NON_STREAMING_FLAGS) {
      if (body[name]) {
        throw new HttpError(
          400,
          `${name} is not supported with streaming. Please set stream=false when using ${name}=true.`,
        );
      }
    }
  }
  // Images are checked and counted before the template renders them (a Qwen-VL template writes a
  // placeholder per image; Qwen3's text template drops them, as SGLang's string content format does).
  const images = checkImages(() => imagesFromMessages(body.messages, engine.images));
  const tok = engine.tokenizer;
  const toolsActive = (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none";
  let promptIds: number[];
  // vLLM's chat endpoint has no `input_ids` (an unknown field it ignores); SGLang 0.5.13 takes it.
  if (body.input_ids && !vllm) {
    // 0.5.13: pre-tokenized prompt ids bypass the chat template entirely.
    engine.checkIds(body.input_ids, "input_ids");
    promptIds = body.input_ids;
  } else {
    const prompt = tok.render(body.messages, {
      ...(toolsActive ? { tools: sglangToolDumps(body.tools!) } : {}),
      addGenerationPrompt: true,
      ...(body.chat_template_kwargs ? { templateKwargs: body.chat_template_kwargs } : {}),
    });
    promptIds = tok.encode(prompt);
  }
  // SGLang's processor expands each placeholder's pad (SGLang 0.5.13 Qwen-VL processor): the
  // usage and `prompt_token_ids` count the expanded prompt.
  promptIds = engine.expandImages(promptIds, images, "messages");
  const requestedMax = body.max_completion_tokens ?? body.max_tokens;
  // vLLM: the prompt may fill the context up to max_tokens exactly; no max_tokens means the rest.
  const maxNewTokens = vllm
    ? vllmOutputBudget(promptIds.length, requestedMax)
    : (requestedMax ?? engine.contextLength);
  // SGLang's scheduler checks where the returned routes start, as for /generate (generate-api.ts).
  const badStart = wantsRoutes ? routedExpertsStartViolation(routedStart.value, promptIds.length) : null;
  if (badStart !== null) {
    if (!body.stream) throw new HttpError(400, badStart);
    writeStreamError(res, badStart, 400, "BAD_REQUEST");
    return;
  }
  // Where the engine takes the request in: vLLM refuses a priority its fcfs policy cannot honour
  // (400), SGLang with --abort-on-priority-when-disabled aborts it (503).
  let priority: number | undefined;
  try {
    priority = requestPriority(engine.priority, requestedPriority);
  } catch (err) {
    if (!(err instanceof PriorityDisabledError) || !body.stream) throw err;
    writeStreamError(res, err.message, err.status, "SERVICE_UNAVAILABLE");
    return;
  }
  const result = await engine.generate(
    {
      promptIds,
      routingKey: routingKeyOf(req, body.rid, body.user),
      maxNewTokens,
      ...(body.temperature != null ? { temperature: body.temperature } : {}),
      stop: stopList(body.stop),
      stopTokenIds: body.stop_token_ids ?? [],
      ignoreEos: body.ignore_eos ?? false,
      ...(vllm ? { rid: vllmRequestId(req, raw) } : body.rid ? { rid: body.rid } : {}),
      ...(images.length ? { images } : {}),
      ...(priority !== undefined ? { priority } : {}),
    },
    signal ? { signal } : {},
  );
  // SGLang keeps special tokens when tools are active so the tool-call parser sees its markup.
  const text = engine.outputText(result, {
    skipSpecialTokens: toolsActive ? false : (body.skip_special_tokens ?? true),
    noStopTrim: body.no_stop_trim ?? false,
  });
  const separated =
    body.separate_reasoning === false ? { reasoning: undefined, text } : separateReasoning(text);
  let content: string | null = separated.text;
  let toolCalls: Array<{
    id: string;
    index: number;
    type: "function";
    function: { name: string; arguments: string };
  }> | null = null;
  let finishReason: string = result.finishReason.type;
  let matchedStop: number | string | null =
    result.finishReason.type === "stop" ? result.finishReason.matched : null;
  if (toolsActive) {
    // The served family's parser, as a server started with its --tool-call-parser (qwen25 for Qwen3).
    const names = body.tools!.map((t) => t.function.name);
    const parsed = engine.dialect
      ? engine.dialect.chatToolCalls(separated.text, names)
      : parseToolCalls(separated.text, names);
    if (parsed.calls.length > 0) {
      content = parsed.normal;
      toolCalls = parsed.calls.map((call, index) => ({
        id: `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`,
        index,
        type: "function",
        function: call,
      }));
      if (finishReason === "stop") {
        finishReason = "tool_calls";
        matchedStop = null;
      }
    }
  }
  const message = {
    role: "assistant" as const,
    content: content === "" && toolCalls ? null : content,
    reasoning_content: separated.reasoning ?? null,
    tool_calls: toolCalls,
  };
  const model = body.model ?? servedModel;
  const created = Math.floor(Date.now() / 1000);
  const usage = {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    total_tokens: result.promptTokens + result.completionTokens,
    prompt_tokens_details: { cached_tokens: result.cachedTokens },
  };
  // SGLang (main as of 2026-12, `serving_chat.py`): the routes go in the response-level `sglext`
  // (and in the choice's `meta_info`, which is the engine's whole meta_info, when asked for).
  const routes = wantsRoutes
    ? engine.routedExpertsOf(promptIds, result.outputIds, routedStart.value)
    : undefined;

  if (vllm) {
    sendVllm(
      res,
      engine,
      result,
      { promptIds, model, created, message, finishReason, matchedStop, usage },
      body,
      flavor,
    );
    return;
  }
  if (body.stream) {
    writeStream(
      res,
      { id: result.rid, created, model, message, finishReason, matchedStop, usage, routes },
      body,
    );
    return;
  }
  const choice: Record<string, unknown> = {
    index: 0,
    message,
    logprobs: body.logprobs ? { content: logprobContent(engine, result) } : null,
    finish_reason: finishReason,
    matched_stop: matchedStop,
    ...(flavor === "sglang" && body.return_prompt_token_ids ? { prompt_token_ids: promptIds } : {}),
    ...(flavor === "sglang" && body.return_meta_info
      ? { meta_info: metaInfo(engine, result, body.logprobs ?? false, routes) }
      : {}),
  };
  if (flavor === "sglang-0.5.10-patched" && body.logprobs) {
    // Polar's 0.5.10 patch: prompt ids on the choice, the sampled id on every logprob entry.
    choice.input_token_ids = promptIds;
    choice.logprobs = {
      content: logprobContent(engine, result).map((e, i) => ({ ...e, token_id: result.outputIds[i]! })),
    };
  }
  sendJson(res, 200, {
    id: result.rid,
    object: "chat.completion",
    created,
    model,
    choices: [choice],
    usage,
    ...(routes !== undefined ? { sglext: { routed_experts: routes } } : {}),
    ...(flavor === "sglang" ? { metadata: { weight_version: result.weightVersion } } : {}),
    system_fingerprint: SIMULATOR_ID,
  });
}

/**
 * vLLM's request id of a chat call: `chatcmpl-` and the `X-Request-Id` header, else the body's
 * `request_id`, else a random one (`serving.py`: `f"chatcmpl-{self._base_request_id(...)}"`). It is
 * the id `/abort_requests` takes and the response's `id`.
 */
function vllmRequestId(req: IncomingMessage, raw: unknown): string {
  const header = req.headers["x-request-id"];
  const fromHeader = Array.isArray(header) ? header[0] : header;
  const fromBody =
    typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>).request_id : undefined;
  const base =
    fromHeader || (typeof fromBody === "string" && fromBody ? fromBody : randomUUID().replaceAll("-", ""));
  return `chatcmpl-${base}`;
}

/**
 * The engine's `meta_info`, as SGLang ≥ 0.5.13 attaches it to the choice. Like SGLang, the per-token
 * logprobs (the output ids) are only there when `logprobs: true`; the chat endpoint asks the engine
 * for token text, so the third element is the token's text.
 */
function metaInfo(engine: SimEngineCore, result: EngineResult, withLogprobs: boolean, routes?: string) {
  return {
    id: result.rid,
    finish_reason: result.finishReason,
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    cached_tokens: result.cachedTokens,
    weight_version: result.weightVersion,
    ...(withLogprobs
      ? {
          output_token_logprobs: result.outputIds.map((id, i) => [
            result.logprobs[i]!,
            id,
            engine.tokenizer.decode([id]),
          ]),
        }
      : {}),
    e2e_latency: result.e2eLatency,
    ...(routes !== undefined ? { routed_experts: routes } : {}),
    simulator: SIMULATOR_ID,
  };
}

interface StreamParts {
  id: string;
  created: number;
  model: string;
  message: { content: string | null; reasoning_content: string | null; tool_calls: unknown[] | null };
  finishReason: string;
  matchedStop: number | string | null;
  usage: unknown;
  /** `sglext.routed_experts`, sent in a chunk of its own after the finish chunk. */
  routes: string | undefined;
}

/** Word-sized pieces, so clients see several deltas as from a real stream. */
function pieces(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/**
 * SGLang's stream for a request its scheduler aborted with a status code (main as of 2026-11,
 * `serving_chat.py`: `create_streaming_error_response(message, code.name, code.value)`): one error
 * event, then `data: [DONE]`. `type` is the status's name (`SERVICE_UNAVAILABLE`, `BAD_REQUEST`).
 */
function writeStreamError(res: ServerResponse, message: string, status: number, type: string): void {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  const error = { object: "error", message, type, param: null, code: status };
  res.write(`data: ${JSON.stringify({ error })}\n\n`);
  res.end("data: [DONE]\n\n");
}

/**
 * Writes the SSE stream of a finished completion: role chunk, reasoning deltas, content deltas,
 * tool calls, the finish chunk, the usage chunk when asked, then `data: [DONE]`.
 */
function writeStream(res: ServerResponse, parts: StreamParts, body: ChatRequest): void {
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  const chunk = (delta: object, finish: string | null = null, extra: object = {}) =>
    `data: ${JSON.stringify({
      id: parts.id,
      object: "chat.completion.chunk",
      created: parts.created,
      model: parts.model,
      system_fingerprint: SIMULATOR_ID,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish, ...extra }],
    })}\n\n`;
  res.write(chunk({ role: "assistant", content: "" }));
  for (const piece of pieces(parts.message.reasoning_content ?? ""))
    res.write(chunk({ reasoning_content: piece }));
  for (const piece of pieces(parts.message.content ?? "")) res.write(chunk({ content: piece }));
  if (parts.message.tool_calls) res.write(chunk({ tool_calls: parts.message.tool_calls }));
  res.write(chunk({}, parts.finishReason, { matched_stop: parts.matchedStop }));
  // SGLang sends the routes in a chunk of their own, with no choice (`sglext` is response-level).
  if (parts.routes !== undefined) {
    res.write(
      `data: ${JSON.stringify({ id: parts.id, object: "chat.completion.chunk", created: parts.created, model: parts.model, choices: [], sglext: { routed_experts: parts.routes } })}\n\n`,
    );
  }
  if (body.stream_options?.include_usage) {
    res.write(
      `data: ${JSON.stringify({ id: parts.id, object: "chat.completion.chunk", created: parts.created, model: parts.model, choices: [], usage: parts.usage })}\n\n`,
    );
  }
  res.end("data: [DONE]\n\n");
}
