/**
 * The simulated SGLang engine: an HTTP server on node:http that speaks SGLang's wire formats
 * (`/generate`, `/v1/chat/completions` with the 0.5.13 TITO extensions, `/v1/models`, `/health`,
 * `/health_generate`, `/model_info`, and the control endpoints of `control-api.ts`) over the real
 * Qwen3 tokenizer and chat template, with a scripted policy instead of a model and a simulated GPU
 * (`scheduler.ts`: latency, running-request limit, aborts, faults). It is named as a simulator in
 * every response.
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { modelFamily } from "../tokenizer/families";
import { controlRoutes, disconnectSignal, type Handler } from "./control-api";
import { dialectFor } from "./dialects";
import { SIM_LIMITS, SIMULATOR_ID, SimEngineCore } from "./engine";
import { handleGenerate, type OutputIdsMode } from "./generate-api";
import { HttpError, readJsonBody, sendError, sendJson } from "./http";
import { handleChatCompletion, isVllmFlavor, type SimFlavor } from "./openai-chat";
import { parseRoutes } from "./parse-api";
import { type PriorityOptions, priorityConfig, priorityServerArgs } from "./priority";
import { type RoutedExpertsShape, routedExpertsShapeViolation } from "./routed-experts";
import type { FaultOptions } from "./scheduler";

/** One paragraph for `polar sim-engine --help`. */
export const SIM_ENGINE_HELP =
  "Starts polar-sim-engine, a simulator of an SGLang inference server for tests and demos. It needs no GPU and " +
  "runs no model: answers come from a scripted, seeded policy (integer arithmetic answered with a short <think> " +
  "block, right most of the time and wrong on purpose sometimes; bug-fix tasks worked through the tools the " +
  "harness offers, fixed in some sessions and not in others; stars counted in PNG images it is sent, by connected " +
  "bright pixels; a generic reply otherwise), tokenized with the real " +
  "Qwen3 tokenizer and chat template, with synthetic logprobs. It serves SGLang's /generate (also streaming), " +
  "/v1/chat/completions, /v1/models, /health, /health_generate, /model_info, /server_info, /abort_request, " +
  "/pause_generation, /continue_generation, /update_weights_from_disk, /update_weight_version, /flush_cache, /v1/loads, /v1/tokenize, " +
  "/v1/detokenize, /parse_function_call, /separate_reasoning and /metrics, plus /sim/stats (busy time, queue, tokens, preemptions), and marks every response as coming " +
  "from the simulator. With --max-running-requests it queues the rest: first come first served, or by request priority as SGLang " +
  "(--enable-priority-scheduling: higher values first unless --schedule-low-priority-values-first, preempting a running request " +
  "for one better by more than --priority-scheduling-preemption-threshold) or vLLM (--flavor vllm --scheduling-policy priority: " +
  "lower values first) schedule. With --enable-return-routed-experts it plays an MoE model (--moe-layers, --moe-top-k, " +
  "--moe-experts) and returns simulated, deterministic expert routes to requests that set return_routed_experts.";

/**
 * SGLang's `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s): how long `/health` waits for its one-token
 * generation before answering 503.
 *
 * @example
 * ```ts
 * await startSimEngine({ healthCheckTimeoutMs: SIM_HEALTH_CHECK_TIMEOUT_MS });
 * ```
 */
export const SIM_HEALTH_CHECK_TIMEOUT_MS = 20_000;

/**
 * Options of {@link startSimEngine}. The priority options ({@link PriorityOptions}) are SGLang's
 * server arguments for the SGLang flavors and vLLM's `schedulingPolicy` for the vLLM flavors.
 */
export interface SimEngineOptions extends PriorityOptions {
  /** Port to listen on; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Served model name; default "Qwen/Qwen3-0.6B". */
  model?: string;
  /**
   * The model family served (`qwen3`, `deepseek_v3`): its tokenizer and template, its default
   * model name, and how the scripted policies read its prompts (`sim/dialects/`). Default `qwen3`.
   */
  modelFamily?: string;
  /** Folder with tokenizer.json + tokenizer_config.json; default the family's files. */
  tokenizerDir?: string;
  /** Seed of the scripted policy; default 0. */
  seed?: number;
  /** Reported `weight_version`; default "default" (as SGLang). */
  weightVersion?: string;
  /** Simulated prefill speed in tokens/s (uncached prompt tokens); default 0 = instant. */
  prefillTokensPerSecond?: number;
  /** Simulated decode speed in tokens/s; default 0 = instant. */
  decodeTokensPerSecond?: number;
  /** Server whose chat response shape to speak; default `sglang` (≥ 0.5.13). */
  flavor?: SimFlavor;
  /** Requests decoding at once; more wait in a queue (FIFO, or by priority). Default 0 = unlimited. */
  maxRunningRequests?: number;
  /** Fault injection: error rate (503), stalls, engine-side aborts. Default none. */
  faults?: FaultOptions;
  /** Stream `/generate` as deltas (SGLang `--incremental-streaming-output`); default snapshots. */
  incrementalStreaming?: boolean;
  /** `/health` answers 503 when its generation takes longer (ms); default {@link SIM_HEALTH_CHECK_TIMEOUT_MS}. */
  healthCheckTimeoutMs?: number;
  /** Context length reported and enforced (SGLang `--context-length`); default 40 960. */
  contextLength?: number;
  /** How `/generate` fills `output_ids` (`sglang-0.5.4-decode-ids`: with the prompt's tail); default `plain`. */
  outputIds?: OutputIdsMode;
  /**
   * SGLang `--enable-return-routed-experts`, with the simulated MoE's shape: requests that set
   * `return_routed_experts` get `meta_info.routed_experts` (`/generate`) or `sglext.routed_experts`
   * (chat), deterministic per (seed, layer, position, token) (`routed-experts.ts`). SGLang flavors
   * only. Default none: such requests get no routes, as from a server without the flag.
   */
  routedExperts?: RoutedExpertsShape;
}

/** A running simulated engine. */
export interface SimEngineHandle {
  url: string;
  port: number;
  close(): Promise<void>;
}

/**
 * Starts the simulated engine and resolves once it listens.
 *
 * @example
 * ```ts
 * const sim = await startSimEngine({ port: 0, seed: 7 });
 * const r = await fetch(`${sim.url}/v1/models`);
 * await sim.close();
 * ```
 */
export async function startSimEngine(opts: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const flavor = opts.flavor ?? "sglang";
  const priority = priorityConfig(opts, isVllmFlavor(flavor) ? "vllm" : "sglang");
  if (opts.routedExperts) {
    if (isVllmFlavor(flavor))
      throw new Error(`routedExperts: SGLang's routing replay; the ${flavor} flavor does not return routes`);
    const bad = routedExpertsShapeViolation(opts.routedExperts);
    if (bad) throw new Error(`routedExperts.${bad.field}: ${bad.message}`);
  }
  const family = modelFamily(opts.modelFamily ?? "qwen3");
  const tokenizer = await loadChatTokenizer(
    opts.tokenizerDir ?? family.tokenizerDir(),
    family.chatTemplateSource === undefined ? {} : { chatTemplateSource: family.chatTemplateSource },
  );
  const model = opts.model ?? family.model;
  const engine = new SimEngineCore({
    tokenizer,
    dialect: dialectFor(family),
    priority,
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    ...(opts.weightVersion !== undefined ? { weightVersion: opts.weightVersion } : {}),
    ...(opts.prefillTokensPerSecond !== undefined
      ? { prefillTokensPerSecond: opts.prefillTokensPerSecond }
      : {}),
    ...(opts.decodeTokensPerSecond !== undefined
      ? { decodeTokensPerSecond: opts.decodeTokensPerSecond }
      : {}),
    ...(opts.maxRunningRequests !== undefined ? { maxRunningRequests: opts.maxRunningRequests } : {}),
    ...(opts.faults ? { faults: opts.faults } : {}),
    ...(opts.contextLength !== undefined ? { contextLength: opts.contextLength } : {}),
    ...(opts.routedExperts ? { routedExperts: opts.routedExperts } : {}),
  });
  const moe = engine.routedExperts;
  const config = {
    model,
    seed: engine.seed,
    flavor,
    prefill_tokens_per_second: opts.prefillTokensPerSecond ?? 0,
    decode_tokens_per_second: opts.decodeTokensPerSecond ?? 0,
    max_running_requests: opts.maxRunningRequests ?? 0,
    // The servers' own argument names, flat, as SGLang's /server_info reports them.
    ...priorityServerArgs(priority),
    incremental_streaming_output: opts.incrementalStreaming ?? false,
    output_ids: opts.outputIds ?? "plain",
    // SGLang's server argument, by its name.
    enable_return_routed_experts: moe !== null,
    // The simulator's own: the MoE shape under the model config's names (SGLang's /server_info
    // and /model_info carry none of them; a real client reads the model's config.json).
    sim_moe_config: moe && {
      num_hidden_layers: moe.layers,
      num_experts_per_tok: moe.topK,
      num_experts: moe.experts,
      dense_layers: moe.denseLayers ?? [],
    },
    faults: opts.faults ?? {},
  };
  // SGLang 0.5.13 / main as of 2026-11 (`http_server.py` `health_generate`): `/health` and
  // `/health_generate` both run a one-token generation through the scheduler's queue
  // (`SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION`, default on), so they answer late when the
  // server is saturated, and 503 after `SGLANG_HEALTH_CHECK_TIMEOUT` (20 s) without an answer.
  let healthChecks = 0;
  const healthGenerate: Handler = async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    // Through the scheduler's queue like any request, but not counted as one: SGLang sends it
    // with `log_metrics=False` (and input_ids [0]) under a `HEALTH_CHECK_<time>` rid.
    const gen = engine.gpu
      .run({
        rid: `HEALTH_CHECK_${Date.now()}_${++healthChecks}`,
        uncachedPromptTokens: 1,
        outputTokens: 1,
        probe: true,
      })
      .then(() => 200);
    const limit = new Promise<number>((resolve) => {
      timer = setTimeout(() => resolve(503), opts.healthCheckTimeoutMs ?? SIM_HEALTH_CHECK_TIMEOUT_MS);
    });
    const status = await Promise.race([gen, limit]).finally(() => clearTimeout(timer));
    res.writeHead(status, { "content-length": 0 });
    res.end();
  };
  const routes: Record<string, Record<string, Handler>> = {
    "/v1/chat/completions": {
      POST: async (req, res) =>
        handleChatCompletion(
          engine,
          model,
          req,
          res,
          await readJsonBody(req, SIM_LIMITS.maxBodyBytes),
          flavor,
          disconnectSignal(res),
        ),
    },
    "/generate": {
      POST: async (req, res) => {
        const out = await handleGenerate(engine, req, await readJsonBody(req, SIM_LIMITS.maxBodyBytes), {
          signal: disconnectSignal(res),
          res,
          incrementalStreaming: opts.incrementalStreaming ?? false,
          outputIds: opts.outputIds ?? "plain",
        });
        if (out) sendJson(res, 200, out);
      },
    },
    ...controlRoutes(engine, config),
    "/v1/models": {
      GET: async (_req, res) =>
        sendJson(res, 200, {
          object: "list",
          data: [
            {
              id: model,
              object: "model",
              created: Math.floor(Date.now() / 1000),
              owned_by: SIMULATOR_ID,
              root: model,
              max_model_len: engine.contextLength,
            },
          ],
        }),
    },
    ...parseRoutes(),
    "/health": { GET: healthGenerate },
    "/health_generate": { GET: healthGenerate },
    "/model_info": {
      GET: async (_req, res) =>
        sendJson(res, 200, {
          model_path: model,
          tokenizer_path: tokenizer.dir,
          is_generation: true,
          preferred_sampling_params: null,
          weight_version: engine.weightVersion,
          has_image_understanding: false,
          has_audio_understanding: false,
          model_type: "qwen3",
          architectures: ["Qwen3ForCausalLM"],
          simulator: true,
        }),
    },
  };

  routes["/get_model_info"] = routes["/model_info"]!;

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const byMethod = routes[path];
    const handler = byMethod?.[req.method ?? "GET"];
    const run = handler
      ? handler(req, res)
      : Promise.reject(
          byMethod
            ? new HttpError(
                405,
                `${req.method} is not allowed on ${path}; use ${Object.keys(byMethod).join(", ")}`,
              )
            : new HttpError(404, `no route ${path} on ${SIMULATOR_ID}`),
        );
    // Every request is isolated: a failing handler answers with an error, the server keeps serving.
    run.catch((error: unknown) => {
      try {
        sendError(res, error);
      } catch {
        res.destroy();
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}
