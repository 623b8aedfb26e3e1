/**
 * `POST /generate`: SGLang's native endpoint (token in, token out). The prompt is `text` or
 * `input_ids`; the policy reads the decoded prompt to decide its answer.
 *
 * @module
 */
import type { IncomingMessage } from "node:http";
import { z } from "zod";
import { SIM_LIMITS, SIMULATOR_ID, type SimEngineCore } from "./engine";
import { HttpError, parseBody } from "./http";

/** Header the SGLang Model Gateway uses for sticky routing; the sim keys its draws by it. */
export const ROUTING_KEY_HEADER = "x-smg-routing-key";

const stopSchema = z.union([z.string(), z.array(z.string()).max(SIM_LIMITS.maxStops)]).nullish();

/** `sampling_params` fields the sim honours; the others (top_p, ...) are accepted and ignored. */
export const SamplingParams = z.looseObject({
  max_new_tokens: z.number().int().min(0).max(SIM_LIMITS.contextLength).nullish(),
  temperature: z.number().min(0).nullish(),
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
 * Handles one `/generate` body and returns the SGLang response object.
 *
 * @example
 * ```ts
 * const out = await handleGenerate(engine, req, { text: "1 + 2 =", sampling_params: { max_new_tokens: 16 } });
 * out.meta_info.finish_reason; // { type: "stop", matched: 151645 }
 * ```
 */
export async function handleGenerate(engine: SimEngineCore, req: IncomingMessage, raw: unknown) {
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
  if ((body.text === undefined) === (body.input_ids === undefined)) {
    throw new HttpError(400, "text / input_ids: give exactly one of text or input_ids");
  }
  if (body.stream)
    throw new HttpError(
      400,
      "stream: streaming /generate is not supported by the simulator; set stream=false",
    );
  const tok = engine.tokenizer;
  let promptIds: number[];
  if (body.input_ids !== undefined) {
    engine.checkIds(body.input_ids, "input_ids");
    promptIds = body.input_ids;
  } else {
    promptIds = tok.encode(body.text!);
    if (promptIds.length === 0) throw new HttpError(400, "text: must not be empty");
  }
  const sp = body.sampling_params ?? {};
  const result = await engine.generate({
    promptIds,
    routingKey: routingKeyOf(req, body.routing_key, body.rid),
    maxNewTokens: sp.max_new_tokens ?? 128,
    ...(sp.temperature != null ? { temperature: sp.temperature } : {}),
    stop: stopList(sp.stop),
    stopTokenIds: sp.stop_token_ids ?? [],
    ignoreEos: sp.ignore_eos ?? false,
    ...(body.rid ? { rid: body.rid } : {}),
  });
  const text = engine.outputText(result, {
    skipSpecialTokens: sp.skip_special_tokens ?? true,
    noStopTrim: sp.no_stop_trim ?? false,
  });
  const withText = body.return_text_in_logprobs ?? false;
  return {
    text,
    output_ids: result.outputIds,
    meta_info: {
      id: result.rid,
      finish_reason: result.finishReason,
      prompt_tokens: result.promptTokens,
      completion_tokens: result.completionTokens,
      cached_tokens: result.cachedTokens,
      weight_version: result.weightVersion,
      ...(body.return_logprob
        ? {
            output_token_logprobs: result.outputIds.map((id, i) => [
              result.logprobs[i]!,
              id,
              withText ? tok.decode([id]) : null,
            ]),
          }
        : {}),
      e2e_latency: result.e2eLatency,
      simulator: SIMULATOR_ID,
    },
    ...(body.return_prompt_token_ids ? { prompt_token_ids: promptIds } : {}),
  };
}
