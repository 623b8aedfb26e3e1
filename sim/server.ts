/**
 * The simulated SGLang engine: an HTTP server on node:http that speaks SGLang's wire formats
 * (`/generate`, `/v1/chat/completions` with the 0.5.13 TITO extensions, `/v1/models`, `/health`,
 * `/health_generate`, `/model_info`) over the real Qwen3 tokenizer and chat template, with a scripted
 * policy instead of a model. It is named as a simulator in every response.
 *
 * @module
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { SIM_LIMITS, SIMULATOR_ID, SimEngineCore } from "./engine";
import { handleGenerate } from "./generate-api";
import { HttpError, readJsonBody, sendError, sendJson } from "./http";
import { handleChatCompletion, type SimFlavor } from "./openai-chat";

/** One paragraph for `polar sim-engine --help`. */
export const SIM_ENGINE_HELP =
  "Starts polar-sim-engine, a simulator of an SGLang inference server for tests and demos. It needs no GPU and " +
  "runs no model: answers come from a scripted, seeded policy (integer arithmetic questions answered with a short " +
  "<think> block, right most of the time and wrong on purpose sometimes; a generic reply otherwise), tokenized " +
  "with the real Qwen3 tokenizer and chat template, with synthetic logprobs. It serves SGLang's /generate, " +
  "/v1/chat/completions (with return_prompt_token_ids, return_meta_info and logprobs), /v1/models, /health, " +
  "/health_generate and /model_info, and marks every response as coming from the simulator.";

/** Options of {@link startSimEngine}. */
export interface SimEngineOptions {
  /** Port to listen on; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Served model name; default "Qwen/Qwen3-0.6B". */
  model?: string;
  /** Folder with tokenizer.json + tokenizer_config.json; default the bundled Qwen3 files. */
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
}

/** A running simulated engine. */
export interface SimEngineHandle {
  url: string;
  port: number;
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

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
  const tokenizer = await loadChatTokenizer(opts.tokenizerDir);
  const model = opts.model ?? "Qwen/Qwen3-0.6B";
  const engine = new SimEngineCore({
    tokenizer,
    ...(opts.seed !== undefined ? { seed: opts.seed } : {}),
    ...(opts.weightVersion !== undefined ? { weightVersion: opts.weightVersion } : {}),
    ...(opts.prefillTokensPerSecond !== undefined
      ? { prefillTokensPerSecond: opts.prefillTokensPerSecond }
      : {}),
    ...(opts.decodeTokensPerSecond !== undefined
      ? { decodeTokensPerSecond: opts.decodeTokensPerSecond }
      : {}),
  });
  const routes: Record<string, Record<string, Handler>> = {
    "/v1/chat/completions": {
      POST: async (req, res) =>
        handleChatCompletion(
          engine,
          model,
          req,
          res,
          await readJsonBody(req, SIM_LIMITS.maxBodyBytes),
          opts.flavor ?? "sglang",
        ),
    },
    "/generate": {
      POST: async (req, res) =>
        sendJson(
          res,
          200,
          await handleGenerate(engine, req, await readJsonBody(req, SIM_LIMITS.maxBodyBytes)),
        ),
    },
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
              max_model_len: SIM_LIMITS.contextLength,
            },
          ],
        }),
    },
    "/health": {
      GET: async (_req, res) => {
        res.writeHead(200, { "content-length": 0 });
        res.end();
      },
    },
    "/health_generate": {
      // Like SGLang, prove the engine can generate one token, not just that the socket is open.
      GET: async (_req, res) => {
        await engine.generate({ promptIds: tokenizer.encode("ping"), routingKey: "health", maxNewTokens: 1 });
        res.writeHead(200, { "content-length": 0 });
        res.end();
      },
    },
    "/pause_generation": {
      POST: async (_req, res) => {
        engine.pause();
        sendJson(res, 200, { success: true, message: "generation paused" });
      },
    },
    "/continue_generation": {
      POST: async (_req, res) => {
        engine.resume();
        sendJson(res, 200, { success: true, message: "generation continued" });
      },
    },
    "/update_weights_from_disk": {
      // No weights to load: only the reported weight_version changes, as after a real update.
      POST: async (req, res) => {
        const body = (await readJsonBody(req, SIM_LIMITS.maxBodyBytes)) as { weight_version?: unknown };
        if (body.weight_version !== undefined && typeof body.weight_version !== "string") {
          throw new HttpError(400, "weight_version: must be a string");
        }
        if (typeof body.weight_version === "string") engine.weightVersion = body.weight_version;
        sendJson(res, 200, { success: true, message: "simulated weight update", num_paused_requests: 0 });
      },
    },
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
