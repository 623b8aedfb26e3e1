/**
 * `POST /generate`: SGLang's native endpoint (token in, token out). The prompt is `text` or
 * `input_ids`; the policy reads the decoded prompt to decide its answer.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { z } from "zod";
import { contextViolation, SGLANG_CONTRACT, samplingParamsViolation } from "../protocol/sglang-contract";
import { type EngineResult, SIM_LIMITS, SIMULATOR_ID, type SimEngineCore } from "./engine";
import { HttpError, parseBody } from "./http";
import { ImageInputError, imagesFromImageData } from "./images";
import { PriorityDisabledError, readPriority, requestPriority } from "./priority";
import { readRoutedExpertsStartLen, routedExpertsStartViolation } from "./routed-experts";

/** Header the SGLang Model Gateway uses for sticky routing; the sim keys its draws by it. */
export const ROUTING_KEY_HEADER = "x-smg-routing-key";

const stopSchema = z.union([z.string(), z.array(z.string()).max(SIM_LIMITS.maxStops)]).nullish();

/**
 * `sampling_params` fields the sim honours. Every value SGLang's `SamplingParams.verify()` refuses
 * is refused first, with its message (the shared contract, {@link checkSamplingParams}); values it
 * accepts but the sim cannot honour (top_p, top_k, min_p, penalties, min_new_tokens, logit_bias,
 * grammars, sampling_seed) are accepted and do not change the scripted answer.
 */
export const SamplingParams = z.looseObject({
  max_new_tokens: z.number().nullish(),
  temperature: z.number().nullish(),
  stop: stopSchema,
  stop_token_ids: z.array(z.number().int().min(0)).max(SIM_LIMITS.maxStops).nullish(),
  skip_special_tokens: z.boolean().nullish(),
  no_stop_trim: z.boolean().nullish(),
  ignore_eos: z.boolean().nullish(),
});

/** The `/generate` body (single requests; batches are refused). */
export const GenerateRequest = z.looseObject({
  text: z.string().optional(),
  input_ids: z.array(z.number()).optional(),
  sampling_params: SamplingParams.nullish(),
  return_logprob: z.boolean().nullish(),
  return_text_in_logprobs: z.boolean().nullish(),
  return_prompt_token_ids: z.boolean().nullish(),
  rid: z.string().min(1).nullish(),
  routing_key: z.string().nullish(),
  stream: z.boolean().nullish(),
  /** Images (data URLs or bare base64), one per image placeholder of the prompt, in order. */
  image_data: z.unknown().optional(),
  /** `GenerateReqInput.priority` (`Optional[int]`), read by {@link readPriority}. */
  priority: z.unknown().optional(),
  /** MoE routing replay: `meta_info.routed_experts` on the final answer (`routed-experts.ts`). */
  return_routed_experts: z.boolean().nullish(),
  /** `GenerateReqInput.routed_experts_start_len` (`int = 0`), read by `readRoutedExpertsStartLen`. */
  routed_experts_start_len: z.unknown().optional(),
});

/**
 * Normalises SGLang's `stop` (string or list) to a list.
 *
 * @example
 * ```ts
 * stopList("\n"); // ["\n"]
 * ```
 */
export function stopList(stop: string | string[] | null | undefined): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === "string" ? [stop] : stop;
}

/**
 * The routing key of a request: the `X-SMG-Routing-Key` header first, then the body fields given
 * in order, else `""`.
 *
 * @example
 * ```ts
 * const key = routingKeyOf(req, body.routing_key, body.rid);
 * ```
 */
export function routingKeyOf(req: IncomingMessage, ...fallbacks: Array<string | null | undefined>): string {
  const header = req.headers[ROUTING_KEY_HEADER];
  const value = Array.isArray(header) ? header[0] : header;
  if (value) return value;
  return fallbacks.find((f) => typeof f === "string" && f.length > 0) ?? "";
}

/**
 * Runs an image check, turning a bad image into a 400 naming its field.
 *
 * @example
 * ```ts
 * const images = checkImages(() => imagesFromImageData(body.image_data, engine.images));
 * ```
 */
export function checkImages<T>(f: () => T): T {
  try {
    return f();
  } catch (err) {
    if (err instanceof ImageInputError) throw new HttpError(400, err.message);
    throw err;
  }
}

/**
 * Refuses what SGLang's `SamplingParams.verify()` refuses (SGLang 0.5 / main as of 2026-11), with
 * its message, as a 400.
 *
 * @example
 * ```ts
 * checkSamplingParams({ repetition_penalty: 3 }, 151936); // throws HttpError 400 "repetition_penalty must be in (0, 2] …"
 * ```
 */
export function checkSamplingParams(raw: unknown, vocabSize: number): void {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return;
  const bad = samplingParamsViolation(raw as Record<string, unknown>, vocabSize);
  if (bad) throw new HttpError(400, bad.message);
}

/**
 * How `output_ids` are filled. `plain` (SGLang main as of 2026-11): the sampled ids.
 * `sglang-0.5.4-decode-ids`: as builds up to 0.5.4 did (sglang #10896; RLinf works around it below
 * 0.5.5) and `Engine.generate` after (#17240): the detokenizer's `decode_ids`, i.e. the prompt's
 * last 5 ids (fewer when the prompt is shorter) in front of the sampled ids, in the final reply
 * (streamed chunks keep the plain ids).
 */
export type OutputIdsMode = "plain" | "sglang-0.5.4-decode-ids";

/** Per-request context of {@link handleGenerate}. */
export interface GenerateContext {
  /** Aborted when the client goes away; the request then finishes as aborted. */
  signal?: AbortSignal;
  /** Where to write the SSE stream when the body asks for `stream: true`. */
  res?: ServerResponse;
  /** SGLang's `--incremental-streaming-output`: chunks carry deltas instead of snapshots. */
  incrementalStreaming?: boolean;
  /** How `output_ids` are filled; default `plain`. */
  outputIds?: OutputIdsMode;
}

/**
 * Handles one `/generate` body and returns the SGLang response object; with `stream: true` it
 * writes the SSE stream to `ctx.res` instead and returns `undefined`.
 *
 * @example
 * ```ts
 * const out = await handleGenerate(engine, req, { text: "1 + 2 =", sampling_params: { max_new_tokens: 16 } });
 * out?.meta_info.finish_reason; // { type: "stop", matched: 151645 }
 * ```
 */
export async function handleGenerate(
  engine: SimEngineCore,
  req: IncomingMessage,
  raw: unknown,
  ctx: GenerateContext = {},
) {
  if (
    raw &&
    typeof raw === "object" &&
    (Array.isArray((raw as { text?: unknown }).text) ||
      Array.isArray((raw as { input_ids?: unknown[] }).input_ids?.[0]))
  ) {
    throw new HttpError(
      400,
      "batch requests (lists of prompts) are not supported by the simulator; send one prompt per request",
    );
  }
  const body = parseBody(GenerateRequest, raw);
  const requestedPriority = readPriority(body.priority);
  const routedStart = readRoutedExpertsStartLen(body.routed_experts_start_len);
  if ("error" in routedStart) throw new HttpError(400, routedStart.error);
  if ((body.text === undefined) === (body.input_ids === undefined)) {
    throw new HttpError(400, "text / input_ids: give exactly one of text or input_ids");
  }
  if (body.stream && !ctx.res)
    throw new HttpError(400, "stream: streaming needs an HTTP response to write to");
  const tok = engine.tokenizer;
  let promptIds: number[];
  if (body.input_ids !== undefined) {
    engine.checkIds(body.input_ids, "input_ids");
    promptIds = body.input_ids;
  } else {
    promptIds = tok.encode(body.text!);
    if (promptIds.length === 0) throw new HttpError(400, "text: must not be empty");
  }
  const images = checkImages(() => imagesFromImageData(body.image_data, engine.images));
  // SGLang's multimodal processor expands each image pad to the image's patch count: the
  // expanded ids are what runs, what `prompt_tokens` counts and what `prompt_token_ids` returns.
  promptIds = engine.expandImages(promptIds, images, "image_data");
  const sp = body.sampling_params ?? {};
  // SGLang checks the context limit (`_validate_one_request`) before `SamplingParams.verify()`.
  const overflow = contextViolation(promptIds.length, sp.max_new_tokens ?? null, engine.contextLength);
  if (overflow) throw new HttpError(400, overflow.message);
  checkSamplingParams(sp, tok.vocabSize);
  const textOptions = {
    skipSpecialTokens: sp.skip_special_tokens ?? true,
    noStopTrim: sp.no_stop_trim ?? false,
  };
  const withText = body.return_text_in_logprobs ?? false;
  const rid = body.rid ?? randomUUID().replaceAll("-", "");
  const routingKey = routingKeyOf(req, body.routing_key, body.rid);
  /**
   * One response object (final, or a streamed snapshot/delta with `finish_reason: null`). The
   * routes come with the final object only (SGLang collects them once the request has finished),
   * and not for a request that never ran (`routed: false`).
   */
  const shape = (r: PartialResult, from: number, finished: boolean, routed = finished) => {
    const routes =
      routed && body.return_routed_experts
        ? engine.routedExpertsOf(promptIds, r.outputIds, routedStart.value)
        : undefined;
    return {
      text: finished
        ? engine.outputText({ ...(r as EngineResult), outputIds: r.outputIds.slice(from) }, textOptions)
        : tok.decode(r.outputIds.slice(from), { skipSpecialTokens: textOptions.skipSpecialTokens }),
      output_ids:
        finished && ctx.outputIds === "sglang-0.5.4-decode-ids"
          ? [...promptIds.slice(-SGLANG_CONTRACT.outputIds.maxPromptTail), ...r.outputIds.slice(from)]
          : r.outputIds.slice(from),
      meta_info: {
        id: r.rid,
        finish_reason: finished ? r.finishReason : null,
        prompt_tokens: r.promptTokens,
        completion_tokens: r.outputIds.length,
        ...(r.cachedTokens !== null ? { cached_tokens: r.cachedTokens } : {}),
        weight_version: r.weightVersion,
        ...(body.return_logprob
          ? {
              output_token_logprobs: r.outputIds
                .slice(from)
                .map((id, i) => [r.logprobs[from + i]!, id, withText ? tok.decode([id]) : null]),
            }
          : {}),
        ...(finished ? { e2e_latency: r.e2eLatency } : {}),
        ...(routes !== undefined ? { routed_experts: routes } : {}),
        simulator: SIMULATOR_ID,
      },
      ...(body.return_prompt_token_ids ? { prompt_token_ids: promptIds } : {}),
    };
  };
  let streamed = 0;
  const sse = (chunk: unknown) => ctx.res!.write(`data: ${JSON.stringify(chunk)}\n\n`);
  /**
   * Streaming, a request SGLang's scheduler aborts before it runs arrives as the stream's one
   * chunk: its finish reason (with the status code, and `err_type` when the scheduler set one),
   * no tokens, no routes.
   */
  const streamAbort = (message: string, status: number, errType?: string) => {
    ctx.res!.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const aborted: PartialResult = {
      rid,
      outputIds: [],
      logprobs: [],
      finishReason: { type: "abort", message },
      promptTokens: promptIds.length,
      cachedTokens: null,
      weightVersion: engine.weightVersion,
      e2eLatency: 0,
    };
    const chunk = shape(aborted, 0, true, false);
    sse({
      ...chunk,
      meta_info: {
        ...chunk.meta_info,
        finish_reason: {
          ...aborted.finishReason,
          status_code: status,
          ...(errType !== undefined ? { err_type: errType } : {}),
        },
      },
    });
    ctx.res!.end("data: [DONE]\n\n");
  };
  // SGLang's scheduler (`handle_generate_request`, main as of 2026-12) checks the start of the
  // returned routes whenever the request asks for them, whether or not the server captures any,
  // and aborts it with a 400 (`set_finish_with_abort`): a ValueError, or the stream's one chunk.
  const badStart = body.return_routed_experts
    ? routedExpertsStartViolation(routedStart.value, promptIds.length)
    : null;
  if (badStart !== null) {
    if (!body.stream) throw new HttpError(400, badStart);
    streamAbort(badStart, 400, "BadRequestError");
    return undefined;
  }
  // Where SGLang's scheduler takes the request in (`_set_or_validate_priority`), after the checks above.
  let priority: number | undefined;
  try {
    priority = requestPriority(engine.priority, requestedPriority);
  } catch (err) {
    if (!(err instanceof PriorityDisabledError) || !body.stream) throw err;
    streamAbort(err.message, err.status);
    return undefined;
  }
  if (body.stream) {
    ctx.res!.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  }
  const result = await engine.generate(
    {
      promptIds,
      routingKey,
      maxNewTokens: sp.max_new_tokens ?? SGLANG_CONTRACT.defaultMaxNewTokens,
      ...(sp.temperature != null ? { temperature: sp.temperature } : {}),
      stop: stopList(sp.stop),
      stopTokenIds: sp.stop_token_ids ?? [],
      ignoreEos: sp.ignore_eos ?? false,
      rid,
      ...(images.length ? { images } : {}),
      ...(priority !== undefined ? { priority } : {}),
    },
    {
      ...(ctx.signal ? { signal: ctx.signal } : {}),
      ...(body.stream
        ? {
            onProgress: (ids: readonly number[], logprobs: readonly number[]) => {
              if (ids.length === 0 || ids.length === streamed) return;
              const partial: PartialResult = {
                rid,
                outputIds: [...ids],
                logprobs: [...logprobs],
                finishReason: null,
                promptTokens: promptIds.length,
                cachedTokens: null,
                weightVersion: engine.weightVersion,
                e2eLatency: 0,
              };
              sse(shape(partial, ctx.incrementalStreaming ? streamed : 0, false));
              streamed = ids.length;
            },
          }
        : {}),
    },
  );
  if (!body.stream) return shape(result, 0, true);
  // The last chunk carries the finish reason (and, incrementally, whatever was not sent yet).
  sse(shape(result, ctx.incrementalStreaming ? Math.min(streamed, result.outputIds.length) : 0, true));
  ctx.res!.end("data: [DONE]\n\n");
  return undefined;
}

/** What a streamed chunk is built from: a finished result, or the part decoded so far. */
type PartialResult = Pick<
  EngineResult,
  "rid" | "outputIds" | "logprobs" | "promptTokens" | "weightVersion" | "e2eLatency"
> & { finishReason: EngineResult["finishReason"] | null; cachedTokens: number | null };
