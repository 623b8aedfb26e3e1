/**
 * The core of the simulated engine, shared by `/generate` and `/v1/chat/completions`: prompt ids in,
 * sampled ids, synthetic logprobs, a SGLang finish reason and usage counts out. The "sampling" is
 * the scripted policy's answer encoded with the real tokenizer, then cut by stop strings, stop token
 * ids and the token budget exactly where SGLang would cut.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import { contextViolation } from "../protocol/sglang-contract";
import type { ChatTokenizer } from "../tokenizer/chat-tokenizer";
import { openAssistantTurn, QWEN3_TURN, remainingAnswer } from "./continuation";
import type { PromptDialect } from "./dialects";
import { expandImagePads, ImageProcessorError, type ImageTokenIds } from "./image-processor";
import { ImageStats, type SimImage } from "./images";
import { decideAnswer, type PolicyAnswer, syntheticLogprob } from "./policy";
import { PrefixCache } from "./prefix-cache";
import { type PriorityConfig, priorityConfig, schedulerPriority } from "./priority";
import {
  type RoutedExpertsShape,
  routedExpertsShapeViolation,
  simRoutedExpertsBase64,
} from "./routed-experts";
import { type FaultOptions, GpuScheduler } from "./scheduler";

/** Limits of the simulated engine. */
export const SIM_LIMITS = {
  /** Default context length reported and enforced (Qwen3-0.6B's `max_position_embeddings`). */
  contextLength: 40_960,
  /** Largest request body (bytes). */
  maxBodyBytes: 16 * 1024 * 1024,
  /** Stop strings / stop token ids per request. */
  maxStops: 64,
} as const;

/** The id a client-facing label calls the simulator, everywhere it is named. */
export const SIMULATOR_ID = "polar-sim-engine";

/** SGLang's finish reason object. */
export type FinishReason =
  | { type: "stop"; matched: number | string }
  | { type: "length"; length: number }
  | { type: "abort"; message: string };

/** One generation request, after the endpoint has turned its body into prompt ids. */
export interface EngineRequest {
  promptIds: readonly number[];
  /** Draws are keyed by this (routing key header, `rid` or `user`). */
  routingKey: string;
  maxNewTokens: number;
  temperature?: number;
  stop?: readonly string[];
  stopTokenIds?: readonly number[];
  ignoreEos?: boolean;
  rid?: string;
  /** Images of the request (chat `image_url` parts or `/generate` `image_data`), checked and measured. */
  images?: readonly SimImage[];
  /** Scheduling priority, as `requestPriority` (`priority.ts`) resolved it; none: the server's default. */
  priority?: number;
}

/** What the engine produced. `outputIds` include the matched stop token, as in SGLang. */
export interface EngineResult {
  rid: string;
  outputIds: number[];
  logprobs: number[];
  finishReason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  weightVersion: string;
  /** Seconds from request start to finish. */
  e2eLatency: number;
  policy: PolicyAnswer;
}

/**
 * A request the engine refuses (HTTP 400), naming the field.
 *
 * @example
 * ```ts
 * throw new EngineInputError("must not be empty", "input_ids");
 * ```
 */
export class EngineInputError extends Error {
  override readonly name = "EngineInputError";
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super(message);
  }
}

/** Options of {@link SimEngineCore}. */
export interface EngineOptions {
  tokenizer: ChatTokenizer;
  /**
   * How the policies read this model family's prompts and write its answers (`sim/dialects/`);
   * default none: the prompts are ChatML (Qwen3).
   */
  dialect?: PromptDialect | null;
  seed?: number;
  weightVersion?: string;
  /** Simulated prefill speed (tokens/s) of uncached prompt tokens; 0 = instant. */
  prefillTokensPerSecond?: number;
  /** Simulated decode speed (tokens/s per request); 0 = instant. */
  decodeTokensPerSecond?: number;
  /** Requests decoding at once; more wait in a queue. 0 (default) = unlimited. */
  maxRunningRequests?: number;
  /** How requests are scheduled by priority (`priority.ts`); default SGLang's defaults (off: FIFO). */
  priority?: PriorityConfig;
  /** Fault injection (error rate, stalls, aborts); default none. */
  faults?: FaultOptions;
  /** Context length reported and enforced (SGLang `--context-length`); default {@link SIM_LIMITS}'s. */
  contextLength?: number;
  /**
   * SGLang `--enable-return-routed-experts` with the simulated model's MoE shape: requests that set
   * `return_routed_experts` get the simulated routes (`routed-experts.ts`). Default none: they get
   * nothing, as from a server started without the flag.
   */
  routedExperts?: RoutedExpertsShape | null;
}

/** Per-call hooks of {@link SimEngineCore.generate}. */
export interface GenerateHooks {
  /** Aborts the generation (client disconnect); it then finishes with `finish_reason.type == "abort"`. */
  signal?: AbortSignal;
  /** Called with the output ids decoded so far and their logprobs (cumulative), for streaming. */
  onProgress?: (outputIds: readonly number[], logprobs: readonly number[]) => void;
}

/**
 * Generation with the scripted policy over a real tokenizer.
 *
 * @example
 * ```ts
 * const engine = new SimEngineCore({ tokenizer: await loadChatTokenizer() });
 * const r = await engine.generate({ promptIds: tok.encode(prompt), routingKey: "s1", maxNewTokens: 128 });
 * r.finishReason; // { type: "stop", matched: 151645 }
 * ```
 */
export class SimEngineCore {
  readonly tokenizer: ChatTokenizer;
  /** How the policies read the served family's prompts; null for Qwen3, whose prompts they read as they are. */
  readonly dialect: PromptDialect | null;
  readonly seed: number;
  weightVersion: string;
  readonly cache = new PrefixCache();
  /** The simulated GPU: latency, capacity, aborts, faults and busy counters. */
  readonly gpu: GpuScheduler;
  /** Images received (`/sim/stats` → `images`). */
  readonly images = new ImageStats();
  /** The context length every endpoint reports and enforces. */
  readonly contextLength: number;
  /** How requests are scheduled by priority: what a request's `priority` does, or why it is refused. */
  readonly priority: PriorityConfig;
  private readonly vocabLimit: number;
  /** Qwen-VL placeholder ids when the tokenizer has them (Qwen3's vocabulary does). */
  readonly imageTokens: ImageTokenIds | null;
  /** Does the served chat template render image placeholders (a vision-language model)? */
  readonly rendersImages: boolean;
  /** The MoE shape routes are returned with (`--enable-return-routed-experts`), or null: none are. */
  readonly routedExperts: RoutedExpertsShape | null;

  constructor(options: EngineOptions) {
    const ctx = options.contextLength ?? SIM_LIMITS.contextLength;
    if (!Number.isInteger(ctx) || ctx < 2)
      throw new Error(`contextLength: must be an integer >= 2, got ${ctx}`);
    this.contextLength = ctx;
    const moe = options.routedExperts ?? null;
    const badShape = moe && routedExpertsShapeViolation(moe);
    if (badShape) throw new Error(`routedExperts.${badShape.field}: ${badShape.message}`);
    this.routedExperts = moe
      ? { ...moe, ...(moe.denseLayers ? { denseLayers: [...moe.denseLayers] } : {}) }
      : null;
    this.tokenizer = options.tokenizer;
    this.dialect = options.dialect ?? null;
    this.seed = options.seed ?? 0;
    this.weightVersion = options.weightVersion ?? "default";
    this.priority = options.priority ?? priorityConfig({}, "sglang");
    this.gpu = new GpuScheduler({
      priority: schedulerPriority(this.priority),
      seed: this.seed,
      ...(options.prefillTokensPerSecond !== undefined
        ? { prefillTokensPerSecond: options.prefillTokensPerSecond }
        : {}),
      ...(options.decodeTokensPerSecond !== undefined
        ? { decodeTokensPerSecond: options.decodeTokensPerSecond }
        : {}),
      ...(options.maxRunningRequests !== undefined ? { maxRunningRequests: options.maxRunningRequests } : {}),
      ...(options.faults ? { faults: options.faults } : {}),
    });
    this.vocabLimit = options.tokenizer.vocabSize;
    const tok = options.tokenizer;
    const [visionStart, imagePad, visionEnd] = ["<|vision_start|>", "<|image_pad|>", "<|vision_end|>"].map(
      (t) => tok.tokenId(t),
    );
    this.imageTokens =
      visionStart !== undefined && imagePad !== undefined && visionEnd !== undefined
        ? { visionStart, imagePad, visionEnd }
        : null;
    this.rendersImages = this.imageTokens !== null && templateRendersImages(tok);
  }

  /**
   * The prompt the model runs for `promptIds` + `images`: each image placeholder's pad expanded
   * to the image's pad count (see `image-processor.ts`; SGLang 0.5.13 Qwen-VL processor). A served
   * text-only template (the bundled Qwen3 one) renders no placeholder, so a prompt without any is
   * run as sent, the images reaching only the scripted policy; under a vision template, or once
   * the prompt holds a pad, the placeholder count must equal the image count.
   */
  expandImages(promptIds: readonly number[], images: readonly SimImage[], field: string): number[] {
    if (images.length === 0 || this.imageTokens === null) return [...promptIds];
    try {
      return expandImagePads(promptIds, images, this.imageTokens, field, {
        allowNoPlaceholder: !this.rendersImages,
      });
    } catch (err) {
      if (err instanceof ImageProcessorError) throw new EngineInputError(err.message, err.field);
      throw err;
    }
  }

  /**
   * `meta_info.routed_experts` of a finished (or aborted) request: the routes of positions
   * `[start, prompt + output - 1)` as base64, or undefined when the server returns none (started
   * without `routedExperts`: SGLang then has no capturer and silently adds nothing).
   */
  routedExpertsOf(
    promptIds: readonly number[],
    outputIds: readonly number[],
    start: number,
  ): string | undefined {
    if (!this.routedExperts) return undefined;
    return simRoutedExpertsBase64([...promptIds, ...outputIds], this.routedExperts, this.seed, start);
  }

  /** Checks ids a client sent (`input_ids`) against the vocabulary. */
  checkIds(ids: readonly number[], field: string): void {
    if (ids.length === 0) throw new EngineInputError("must not be empty", field);
    const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= this.vocabLimit);
    if (bad !== -1)
      throw new EngineInputError(
        `token id ${ids[bad]} is outside the vocabulary [0, ${this.vocabLimit})`,
        `${field}[${bad}]`,
      );
  }

  private pauseGate: Promise<void> | null = null;
  private releasePause: (() => void) | null = null;

  /** SGLang `/pause_generation`: new generations wait until {@link resume}. */
  pause(): void {
    if (this.pauseGate) return;
    this.pauseGate = new Promise((resolve) => {
      this.releasePause = resolve;
    });
  }

  /** SGLang `/continue_generation`. */
  resume(): void {
    this.releasePause?.();
    this.pauseGate = null;
    this.releasePause = null;
  }

  /** True while paused. */
  get paused(): boolean {
    return this.pauseGate !== null;
  }

  /** Runs one request through the policy and the stop/length rules. */
  async generate(request: EngineRequest, hooks: GenerateHooks = {}): Promise<EngineResult> {
    while (this.pauseGate) await this.pauseGate;
    const started = performance.now();
    const promptIds = request.promptIds;
    // SGLang 0.5 / main as of 2026-11 (`_validate_one_request`): a prompt filling the context is
    // refused; a budget past it is the endpoint's to refuse (explicit max_new_tokens) or clamp.
    const tooLong = contextViolation(promptIds.length, null, this.contextLength);
    if (tooLong) throw new EngineInputError(tooLong.message);
    const room = this.contextLength - promptIds.length;
    const maxNew = Math.min(request.maxNewTokens, room);
    const cachedTokens = this.cache.cachedTokens(promptIds);

    const { policy, answerIds, offset } = this.answer(request);
    const cut = this.cut(answerIds, maxNew, request);
    const rid = request.rid ?? randomUUID().replaceAll("-", "");
    const allLogprobs = cut.outputIds.map((id, i) =>
      syntheticLogprob(this.seed, request.routingKey, offset + i, id),
    );

    this.gpu.admit();
    this.gpu.countPrompt(promptIds.length, cachedTokens);
    const outcome = await this.gpu.run({
      rid,
      uncachedPromptTokens: promptIds.length - cachedTokens,
      outputTokens: cut.outputIds.length,
      ...(request.priority !== undefined ? { priority: request.priority } : {}),
      ...(hooks.signal ? { signal: hooks.signal } : {}),
      ...(hooks.onProgress
        ? {
            onProgress: (n: number) => hooks.onProgress?.(cut.outputIds.slice(0, n), allLogprobs.slice(0, n)),
          }
        : {}),
    });
    const outputIds = cut.outputIds.slice(0, outcome.produced);
    const finishReason: FinishReason =
      outcome.abortMessage !== undefined
        ? { type: "abort", message: outcome.abortMessage }
        : cut.finishReason;
    const logprobs = allLogprobs.slice(0, outcome.produced);
    this.cache.insert([...promptIds, ...outputIds]);
    return {
      rid,
      outputIds,
      logprobs,
      finishReason,
      promptTokens: promptIds.length,
      completionTokens: outputIds.length,
      cachedTokens,
      weightVersion: this.weightVersion,
      e2eLatency: (performance.now() - started) / 1000,
      policy,
    };
  }

  /**
   * The policy's answer to a request. A prompt that ends inside an assistant turn the policy had
   * begun (a partial rollout sent back after an abort) gets the rest of that turn, as a model
   * continues its own text (`continuation.ts`); `offset` is how many of the turn's tokens the
   * prompt already held.
   */
  private answer(request: EngineRequest): { policy: PolicyAnswer; answerIds: number[]; offset: number } {
    const dialect = this.dialect;
    const decide = (prompt: string): PolicyAnswer => {
      const policy = decideAnswer({
        seed: this.seed,
        routingKey: request.routingKey,
        prompt: dialect ? dialect.readPrompt(prompt) : prompt,
        ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
        ...(request.images?.length ? { images: request.images } : {}),
      });
      return dialect ? { ...policy, text: dialect.writeAnswer(policy.text) } : policy;
    };
    const open = request.images?.length
      ? null
      : openAssistantTurn(this.tokenizer, request.promptIds, dialect?.turn ?? QWEN3_TURN);
    for (const start of open?.starts ?? []) {
      const policy = decide(this.tokenizer.decode(request.promptIds.slice(0, start)));
      const rest = remainingAnswer(this.tokenizer.encode(policy.text), request.promptIds, start);
      if (rest) return { policy, answerIds: rest, offset: request.promptIds.length - start };
    }
    const policy = decide(this.tokenizer.decode(request.promptIds));
    return { policy, answerIds: this.tokenizer.encode(policy.text), offset: 0 };
  }

  /** Applies stop token ids, stop strings, EOS and the budget, token by token, as a decoder would. */
  private cut(
    answerIds: number[],
    maxNew: number,
    request: EngineRequest,
  ): { outputIds: number[]; finishReason: FinishReason } {
    const stops = (request.stop ?? []).filter((s) => s.length > 0);
    const stopIds = new Set(request.stopTokenIds ?? []);
    const eos = this.tokenizer.eosTokenIds[0];
    const sequence = request.ignoreEos || eos === undefined ? answerIds : [...answerIds, eos];
    const out: number[] = [];
    for (const id of sequence) {
      if (out.length >= maxNew)
        return { outputIds: out, finishReason: { type: "length", length: out.length } };
      out.push(id);
      if (stopIds.has(id) || (!request.ignoreEos && this.tokenizer.eosTokenIds.includes(id))) {
        return { outputIds: out, finishReason: { type: "stop", matched: id } };
      }
      if (stops.length > 0) {
        const text = this.tokenizer.decode(out);
        const hit = stops.find((s) => text.includes(s));
        if (hit !== undefined) return { outputIds: out, finishReason: { type: "stop", matched: hit } };
      }
    }
    // Only reachable with ignore_eos: the policy has nothing more to say, the budget ends it.
    return { outputIds: out, finishReason: { type: "length", length: out.length } };
  }

  /**
   * The text SGLang returns for a result: the matched stop token is trimmed, a matched stop string
   * is cut off (unless `noStopTrim`), special tokens are skipped unless asked to keep them.
   */
  outputText(result: EngineResult, options: { skipSpecialTokens: boolean; noStopTrim: boolean }): string {
    const matched = result.finishReason.type === "stop" ? result.finishReason.matched : undefined;
    const ids =
      typeof matched === "number" && !options.noStopTrim ? result.outputIds.slice(0, -1) : result.outputIds;
    let text = this.tokenizer.decode(ids, { skipSpecialTokens: options.skipSpecialTokens });
    if (typeof matched === "string" && !options.noStopTrim) {
      const at = text.indexOf(matched);
      if (at !== -1) text = text.slice(0, at);
    }
    return text;
  }
}

/** Renders one image part with the template and looks for the Qwen-VL pad. */
function templateRendersImages(tok: ChatTokenizer): boolean {
  try {
    const probe = tok.render(
      [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }],
      {
        addGenerationPrompt: false,
      },
    );
    return probe.includes("<|image_pad|>");
  } catch {
    return false;
  }
}
