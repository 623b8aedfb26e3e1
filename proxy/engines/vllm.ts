/**
 * The `vllm` engine: vLLM's `/v1/chat/completions` with `return_token_ids` (≥ 0.10.2).
 *
 * - request: `logprobs: true`, `top_logprobs: 0` when unset (vLLM fills `logprobs.content` only
 *   then), `return_token_ids: true`; message `reasoning_content` renamed `reasoning` (the name vLLM
 *   reads; otherwise earlier thinking renders as an empty block);
 * - response: prompt ids at the top level `prompt_token_ids`, sampled ids at `choices[0].token_ids`,
 *   logprobs from `logprobs.content[].logprob` when aligned, reasoning in `message.reasoning`;
 * - streaming keeps the ids: `prompt_token_ids` on the first chunk, `token_ids` per delta — so the
 *   proxy streams for real and accumulates the record ({@link VllmStreamAccumulator}).
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { EngineContractError, ProxyHttpError } from "../errors";
import type { DeltaEvent } from "../families/types";
import { isObject, objects } from "../json";
import { type NormalizedCompletion, ROUTING_KEY_HEADER, type ServedRequest } from "./sglang-openai";
import { validateVllmSampling } from "./vllm-validate";

const isTokenId = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/**
 * The request served to vLLM; values vLLM's sampling validation refuses are refused first (a 400
 * naming the field, see `vllm-validate.ts`).
 *
 * @example
 * ```ts
 * buildVllmChatRequest(chat, { modelServed: "Qwen/Qwen3-8B", sessionId: "s1", stream: true }).body.return_token_ids; // true
 * ```
 */
export function buildVllmChatRequest(
  chat: JsonObject,
  opts: { modelServed: string; sessionId: string; stream?: boolean },
): ServedRequest {
  validateVllmSampling(chat);
  const body: JsonObject = { ...chat, model: opts.modelServed, logprobs: true, return_token_ids: true };
  if (body.top_logprobs == null) body.top_logprobs = 0;
  if (body.max_completion_tokens !== undefined) {
    if (body.max_tokens === undefined) body.max_tokens = body.max_completion_tokens;
    delete body.max_completion_tokens;
  }
  body.messages = objects(chat.messages).map((m) => {
    if (m.reasoning_content === undefined) return m;
    const { reasoning_content, ...rest } = m;
    return { ...rest, reasoning: reasoning_content };
  });
  if (opts.stream) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  } else {
    body.stream = false;
    delete body.stream_options;
  }
  return { body, headers: { "content-type": "application/json", [ROUTING_KEY_HEADER]: opts.sessionId } };
}

function ids(value: unknown, field: string): number[] {
  if (!Array.isArray(value)) throw new EngineContractError(field, "is not an array");
  value.forEach((id, i) => {
    if (!isTokenId(id)) throw new EngineContractError(`${field}[${i}]`, "is not a token id");
  });
  return value as number[];
}

/** Logprobs from `logprobs.content[]` if one entry per id (and `token_id:N` tokens match); else null. */
function aligned(content: unknown, out: number[]): number[] | null {
  if (!Array.isArray(content) || content.length !== out.length) return null;
  const lps: number[] = [];
  for (let i = 0; i < content.length; i++) {
    const e = content[i];
    if (!isObject(e) || typeof e.logprob !== "number" || Number.isNaN(e.logprob)) return null;
    if (e.token_id !== undefined && e.token_id !== out[i]) return null;
    const m = typeof e.token === "string" ? /^token_id:(\d+)$/.exec(e.token) : null;
    if (m && Number(m[1]) !== out[i]) return null;
    lps.push(e.logprob);
  }
  return lps;
}

/**
 * Token facts of a vLLM chat completion; throws {@link EngineContractError} naming a missing field.
 *
 * @example
 * ```ts
 * const n = normalizeVllmChatResponse(raw); // n.prompt_ids, n.response_ids, n.response_logprobs
 * ```
 */
export function normalizeVllmChatResponse(raw: unknown): NormalizedCompletion {
  if (!isObject(raw)) throw new EngineContractError("(body)", "is not a JSON object");
  const choice = objects(raw.choices)[0];
  if (!choice) throw new EngineContractError("choices[0]");
  const promptSource = raw.prompt_token_ids ?? choice.prompt_token_ids;
  if (promptSource == null) throw new EngineContractError("prompt_token_ids");
  const prompt_ids = ids(
    promptSource,
    raw.prompt_token_ids != null ? "prompt_token_ids" : "choices[0].prompt_token_ids",
  );
  if (choice.token_ids == null) throw new EngineContractError("choices[0].token_ids");
  const response_ids = ids(choice.token_ids, "choices[0].token_ids");
  // vLLM ends a request it aborted (a `/pause` in its default `abort` mode, `/abort_requests`) with
  // `finish_reason: "abort"` and the partial output: not a turn the policy finished, so it is
  // neither recorded nor shown as an answer; the harness is told to retry.
  if (choice.finish_reason === "abort") {
    throw new ProxyHttpError(
      503,
      "api_error",
      "engine_aborted",
      "the engine aborted the generation (a weight-update pause); retry",
    );
  }
  const lp = isObject(choice.logprobs) ? choice.logprobs.content : undefined;
  const usage = isObject(raw.usage) ? raw.usage : {};
  const details = isObject(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const message = isObject(choice.message) ? renameReasoning(choice.message) : null;
  return {
    prompt_ids,
    response_ids,
    response_logprobs: aligned(lp, response_ids),
    finish_reason: typeof choice.finish_reason === "string" ? choice.finish_reason : null,
    weight_version: null,
    cached_tokens: isTokenId(details.cached_tokens) ? details.cached_tokens : null,
    message,
  };
}

function renameReasoning(message: JsonObject): JsonObject {
  const { reasoning, ...rest } = message;
  if (reasoning === undefined) return message;
  return { ...rest, reasoning_content: rest.reasoning_content ?? reasoning };
}

/**
 * The completion in the internal form: ids removed, `reasoning` renamed `reasoning_content`.
 *
 * @example
 * ```ts
 * vllmClientCompletion(raw).choices[0].message.reasoning_content;
 * ```
 */
export function vllmClientCompletion(raw: JsonObject): JsonObject {
  const { prompt_token_ids: _p, prompt_logprobs: _pl, kv_transfer_params: _k, ...rest } = raw;
  return {
    ...rest,
    choices: objects(raw.choices).map((c) => {
      const { token_ids: _t, prompt_token_ids: _cp, ...choice } = c;
      return isObject(choice.message) ? { ...choice, message: renameReasoning(choice.message) } : choice;
    }),
  };
}

/**
 * The vLLM response as stored on the record: id arrays removed (they are on the record itself).
 *
 * @example
 * ```ts
 * record.response = recordableVllmResponse(raw);
 * ```
 */
export function recordableVllmResponse(raw: JsonObject): JsonObject {
  const { prompt_token_ids: _p, ...rest } = raw;
  return {
    ...rest,
    choices: objects(raw.choices).map((c) => {
      const { token_ids: _t, prompt_token_ids: _cp, ...choice } = c;
      return choice;
    }),
  };
}

/**
 * Folds vLLM stream chunks into the non-streaming response they add up to, and yields the text
 * deltas to forward at once. Tool-call fragments are held back until the call is complete.
 *
 * @example
 * ```ts
 * const acc = new VllmStreamAccumulator();
 * for await (const chunk of chunks) for (const ev of acc.push(chunk)) writer.delta(ev);
 * const raw = acc.result(); // same shape as a non-streaming response
 * ```
 */
export class VllmStreamAccumulator {
  private id: unknown = null;
  private created: unknown = null;
  private model: unknown = null;
  private promptIds: number[] | null = null;
  private readonly tokenIds: number[] = [];
  private readonly logprobs: JsonObject[] = [];
  private content = "";
  private reasoning = "";
  private readonly calls: Array<{ id: string; name: string; arguments: string }> = [];
  private finish: unknown = null;
  private stopReason: unknown = null;
  private usage: unknown = null;
  private sawTokenIds = false;

  push(chunk: JsonObject): DeltaEvent[] {
    this.id ??= chunk.id;
    this.created ??= chunk.created;
    this.model ??= chunk.model;
    if (Array.isArray(chunk.prompt_token_ids))
      this.promptIds = ids(chunk.prompt_token_ids, "prompt_token_ids");
    if (isObject(chunk.usage)) this.usage = chunk.usage;
    const out: DeltaEvent[] = [];
    for (const choice of objects(chunk.choices)) {
      if (Array.isArray(choice.prompt_token_ids))
        this.promptIds = ids(choice.prompt_token_ids, "choices[0].prompt_token_ids");
      if (Array.isArray(choice.token_ids)) {
        this.sawTokenIds = true;
        this.tokenIds.push(...ids(choice.token_ids, "choices[0].token_ids"));
      }
      if (isObject(choice.logprobs)) this.logprobs.push(...objects(choice.logprobs.content));
      const delta = isObject(choice.delta) ? choice.delta : {};
      const reasoning = delta.reasoning ?? delta.reasoning_content;
      if (typeof reasoning === "string" && reasoning) {
        this.reasoning += reasoning;
        out.push({ kind: "reasoning", text: reasoning });
      }
      if (typeof delta.content === "string" && delta.content) {
        this.content += delta.content;
        out.push({ kind: "text", text: delta.content });
      }
      for (const tc of objects(delta.tool_calls)) {
        const index = typeof tc.index === "number" ? tc.index : this.calls.length;
        const fn = isObject(tc.function) ? tc.function : {};
        let call = this.calls[index];
        if (!call) {
          call = { id: "", name: "", arguments: "" };
          this.calls[index] = call;
        }
        if (typeof tc.id === "string") call.id = tc.id;
        if (typeof fn.name === "string") call.name += fn.name;
        if (typeof fn.arguments === "string") call.arguments += fn.arguments;
      }
      if (choice.finish_reason != null) this.finish = choice.finish_reason;
      if (choice.stop_reason != null) this.stopReason = choice.stop_reason;
    }
    return out;
  }

  /** The complete tool calls, once the stream has ended. */
  toolCalls(): Array<{ id: string; name: string; arguments: string }> {
    return this.calls.filter(Boolean);
  }

  /** The equivalent non-streaming response. */
  result(): JsonObject {
    const calls = this.toolCalls();
    return {
      id: this.id,
      object: "chat.completion",
      created: this.created,
      model: this.model,
      ...(this.promptIds ? { prompt_token_ids: this.promptIds } : {}),
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: this.content || (calls.length > 0 ? null : ""),
            ...(this.reasoning ? { reasoning: this.reasoning } : {}),
            tool_calls: calls.map((c) => ({
              id: c.id,
              type: "function",
              function: { name: c.name, arguments: c.arguments },
            })),
          },
          logprobs: { content: this.logprobs },
          finish_reason: this.finish,
          stop_reason: this.stopReason,
          ...(this.sawTokenIds ? { token_ids: this.tokenIds } : {}),
        },
      ],
      usage: this.usage,
    };
  }
}
