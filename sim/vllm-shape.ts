/**
 * vLLM's chat completion shape for the simulated engine (main as of 2026-11, `ChatCompletionResponse`
 * in `vllm/entrypoints/openai/chat_completion/protocol.py`): with `return_token_ids` (≥ 0.10.2; the
 * `vllm-0.10.1` flavor ignores it) the prompt ids at the top level (`prompt_token_ids`) and the
 * sampled ids per choice (`token_ids`); reasoning in `message.reasoning`; with `logprobs: true`,
 * `logprobs.content` filled unless `top_logprobs` is explicitly null (its default is 0; `serving.py`
 * builds logprobs only when `top_logprobs is not None`); `stop_reason` next to `finish_reason`, which
 * is `"abort"` for an aborted request (partial output). Streams keep the ids: the first chunk
 * carries `prompt_token_ids`, every chunk its own `token_ids` delta and logprobs.
 *
 * @module
 */
import type { ServerResponse } from "node:http";
import { type ChatRequest, logprobContent } from "./chat-request";
import type { EngineResult, SimEngineCore } from "./engine";
import { sendJson } from "./http";

/** The chat response shapes the simulator speaks (declared here, where both chat modules can import it). */
export type SimFlavor = "sglang" | "sglang-0.5.10-patched" | "vllm" | "vllm-0.10.1";

/** The parts of an answer the chat endpoint already computed. */
export interface VllmAnswer {
  promptIds: number[];
  model: string;
  created: number;
  message: { content: string | null; reasoning_content: string | null; tool_calls: unknown[] | null };
  finishReason: string;
  matchedStop: number | string | null;
  usage: unknown;
}

/** Word-sized pieces, so clients see several deltas as from a real stream. */
function pieces(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/**
 * Sends the answer in vLLM's shape (JSON or SSE).
 *
 * @example
 * ```ts
 * sendVllm(res, engine, result, answer, body);
 * ```
 */
export function sendVllm(
  res: ServerResponse,
  engine: SimEngineCore,
  result: EngineResult,
  answer: VllmAnswer,
  body: ChatRequest,
  flavor: SimFlavor = "vllm",
): void {
  const withIds = body.return_token_ids === true && flavor !== "vllm-0.10.1";
  const withLogprobs = body.logprobs === true && body.top_logprobs !== null;
  // The rid is vLLM's request id, already `chatcmpl-…`.
  const id = result.rid.startsWith("chatcmpl-") ? result.rid : `chatcmpl-${result.rid}`;
  const { reasoning_content, ...rest } = answer.message;
  const message = {
    role: "assistant",
    ...rest,
    reasoning: reasoning_content,
    tool_calls: rest.tool_calls ?? [],
  };
  const stopReason = answer.finishReason === "length" ? null : answer.matchedStop;
  if (!body.stream) {
    sendJson(res, 200, {
      id,
      object: "chat.completion",
      created: answer.created,
      model: answer.model,
      choices: [
        {
          index: 0,
          message,
          logprobs: withLogprobs ? { content: logprobContent(engine, result) } : null,
          finish_reason: answer.finishReason,
          stop_reason: stopReason,
          ...(withIds ? { token_ids: result.outputIds } : {}),
        },
      ],
      usage: answer.usage,
      ...(withIds ? { prompt_token_ids: answer.promptIds } : {}),
      prompt_logprobs: null,
    });
    return;
  }
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  // Deltas in answer order; the sampled ids are spread over them so each chunk carries its share.
  const deltas: Array<Record<string, unknown>> = [
    ...pieces(answer.message.reasoning_content ?? "").map((p) => ({ reasoning: p })),
    ...pieces(answer.message.content ?? "").map((p) => ({ content: p })),
  ];
  (answer.message.tool_calls ?? []).forEach((raw, index) => {
    const call = raw as { id: string; function: { name: string; arguments: string } };
    const args = call.function.arguments;
    const half = Math.ceil(args.length / 2);
    deltas.push({
      tool_calls: [
        {
          index,
          id: call.id,
          type: "function",
          function: { name: call.function.name, arguments: args.slice(0, half) },
        },
      ],
    });
    deltas.push({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] });
  });
  const lps = logprobContent(engine, result);
  const n = Math.max(deltas.length, 1);
  const per = Math.ceil(result.outputIds.length / n);
  const chunk = (i: number, delta: Record<string, unknown>, extra: Record<string, unknown> = {}) => {
    const from = Math.min(i * per, result.outputIds.length);
    const to = i === n - 1 ? result.outputIds.length : Math.min(from + per, result.outputIds.length);
    return `data: ${JSON.stringify({
      id,
      object: "chat.completion.chunk",
      created: answer.created,
      model: answer.model,
      ...(i === 0 && withIds ? { prompt_token_ids: answer.promptIds } : {}),
      choices: [
        {
          index: 0,
          delta: i === 0 ? { role: "assistant", ...delta } : delta,
          logprobs: withLogprobs ? { content: lps.slice(from, to) } : null,
          finish_reason: null,
          ...(withIds ? { token_ids: result.outputIds.slice(from, to) } : {}),
          ...extra,
        },
      ],
    })}\n\n`;
  };
  for (let i = 0; i < n; i++) res.write(chunk(i, deltas[i] ?? { content: "" }));
  res.write(
    `data: ${JSON.stringify({
      id,
      object: "chat.completion.chunk",
      created: answer.created,
      model: answer.model,
      choices: [
        {
          index: 0,
          delta: {},
          logprobs: null,
          finish_reason: answer.finishReason,
          stop_reason: stopReason,
          ...(withIds ? { token_ids: [] } : {}),
        },
      ],
    })}\n\n`,
  );
  if (body.stream_options?.include_usage) {
    res.write(
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: answer.created, model: answer.model, choices: [], usage: answer.usage })}\n\n`,
    );
  }
  res.end("data: [DONE]\n\n");
}
