/**
 * The control and introspection endpoints of the simulated engine, as SGLang names them:
 * `/abort_request`, `/pause_generation`, `/continue_generation`, `/update_weights_from_disk`,
 * `/update_weight_version`,
 * `/flush_cache`, `/v1/loads`, `/server_info`, `/v1/tokenize`, `/v1/detokenize` (with their older
 * aliases), plus the simulator's own `/sim/stats` and a Prometheus `/metrics`. The vLLM flavors
 * answer vLLM's control routes instead of SGLang's ({@link vllmControlRoutes}).
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Gauge, Registry } from "prom-client";
import { z } from "zod";
import { sglangToolDumps } from "../tokenizer/chat-tokenizer";
import { SIM_LIMITS, SIMULATOR_ID, type SimEngineCore } from "./engine";
import { HttpError, parseBody, readJsonBody, sendJson } from "./http";

/** One route handler. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * A signal that fires when the client goes away before the response is finished; SGLang aborts
 * the request then (`create_abort_task`), and so does the sim.
 *
 * @example
 * ```ts
 * await engine.generate(request, { signal: disconnectSignal(res) });
 * ```
 */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort(new Error("Abort: the client disconnected"));
  });
  return controller.signal;
}

const body = (req: IncomingMessage) => readJsonBody(req, SIM_LIMITS.maxBodyBytes);

/** `POST /sim/faults`: the fault knobs to change, each a probability per request (stall in ms). */
const rate = z.number().min(0).max(1).optional();
const SimFaultsBody = z.strictObject({
  error_rate: rate,
  stall_rate: rate,
  stall_ms: z.number().int().min(0).max(600_000).optional(),
  abort_rate: rate,
});

/** A body that may be absent (SGLang accepts bare POSTs on several control endpoints). */
async function optionalBody(req: IncomingMessage): Promise<unknown> {
  const length = req.headers["content-length"];
  if (length === "0" || (length === undefined && req.headers["transfer-encoding"] === undefined)) return {};
  return body(req);
}

const AbortBody = z.looseObject({ rid: z.string().min(1).optional(), abort_all: z.boolean().optional() });
const PauseBody = z.looseObject({ mode: z.enum(["abort", "retract", "in_place"]).optional() });
const UpdateWeightsBody = z.looseObject({
  model_path: z.string().optional(),
  weight_version: z.string().optional(),
  abort_all_requests: z.boolean().optional(),
});
const UpdateWeightVersionBody = z.looseObject({
  new_version: z.string().min(1),
  abort_all_requests: z.boolean().optional(),
});
const TokenizeBody = z.looseObject({
  prompt: z.union([z.string(), z.array(z.string())]).optional(),
  messages: z.array(z.looseObject({ role: z.string() })).optional(),
  tools: z.array(z.looseObject({ function: z.looseObject({ name: z.string() }) })).optional(),
  add_special_tokens: z.boolean().optional(),
  add_generation_prompt: z.boolean().optional(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).optional(),
});
const DetokenizeBody = z.looseObject({
  tokens: z.array(z.number().int()),
  skip_special_tokens: z.boolean().optional(),
});

/**
 * The next weight version after an update without an explicit one: a trailing number counts up,
 * anything else (SGLang's `"default"`) becomes `"1"` or gets `.1` appended.
 *
 * @example
 * ```ts
 * nextWeightVersion("step-3"); // "step-4"
 * nextWeightVersion("default"); // "1"
 * ```
 */
export function nextWeightVersion(current: string): string {
  const m = /^(.*?)(\d+)$/.exec(current);
  if (m) return `${m[1]}${Number(m[2]) + 1}`;
  return current === "default" ? "1" : `${current}.1`;
}

/** Builds the Prometheus registry whose gauges read the scheduler's counters at scrape time. */
function metricsRegistry(engine: SimEngineCore, model: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ model_name: model });
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  const s = () => engine.gpu.stats();
  // SGLang's own metric names where one exists (`sglang:num_running_reqs`, ...), sim_ otherwise.
  gauge("sglang:num_running_reqs", "Requests decoding now", () => s().running);
  gauge("sglang:num_queue_reqs", "Requests waiting for a running slot", () => s().waiting);
  gauge("sglang:prompt_tokens_total", "Prompt tokens received", () => s().prompt_tokens_total);
  gauge("sglang:generation_tokens_total", "Tokens generated", () => s().generation_tokens_total);
  gauge(
    "sglang:cached_tokens_total",
    "Prompt tokens served from the prefix cache",
    () => s().cached_tokens_total,
  );
  gauge("sim_busy_seconds_total", "Time with at least one running request", () => s().busy_seconds);
  gauge(
    "sim_running_request_seconds_total",
    "Integral of running requests over time",
    () => s().running_request_seconds,
  );
  gauge("sim_requests_total", "Generation requests received", () => s().requests_total);
  gauge("sim_aborted_requests_total", "Generation requests that finished aborted", () => s().aborted_total);
  gauge(
    "sim_preempted_requests_total",
    "Running requests preempted for a waiting request of better priority",
    () => s().preempted_total,
  );
  gauge("sim_fault_errors_total", "Requests failed by fault injection", () => s().faults.errors);
  return registry;
}

/** SGLang's control routes that vLLM does not have (a vLLM server answers them 404). */
const SGLANG_ONLY_ROUTES = [
  "/abort_request",
  "/pause_generation",
  "/continue_generation",
  "/update_weights_from_disk",
  "/update_weight_version",
  "/flush_cache",
  "/v1/loads",
] as const;

const VllmAbortBody = z.looseObject({ request_ids: z.array(z.string()).nullish() });
const VllmWeightVersionBody = z.looseObject({ new_version: z.string() });

/** The query parameters of a request URL. */
function queryOf(req: IncomingMessage): URLSearchParams {
  return new URL(req.url ?? "/", "http://sim").searchParams;
}

/** A FastAPI-style query boolean (`true`/`1`/`yes`/`on`, `false`/`0`/`no`/`off`). */
function queryBool(q: URLSearchParams, name: string, fallback: boolean): boolean {
  const v = q.get(name);
  if (v === null) return fallback;
  if (["true", "1", "yes", "on"].includes(v.toLowerCase())) return true;
  if (["false", "0", "no", "off"].includes(v.toLowerCase())) return false;
  throw new HttpError(422, `${name}: Input should be a valid boolean, got '${v}'`);
}

async function idle(engine: SimEngineCore): Promise<void> {
  while (engine.gpu.busy) await new Promise((r) => setTimeout(r, 10));
}

/**
 * vLLM's pause and weight-version routes, as its RLHF dev router serves them with
 * `VLLM_SERVER_DEV_MODE=1` (`vllm/entrypoints/serve/dev/rlhf/api_router.py`, main as of 2026-11):
 * `POST /pause?mode=abort|wait|keep&clear_cache=` (PR #28037, 2025-11; `mode` since PR #32351,
 * 2026-02) → `{"status": "paused"}`; `POST /resume` → `{"status": "resumed"}`; `GET /is_paused` →
 * `{"is_paused": bool}`; `POST /abort_requests` `{request_ids?}` (PR #47173, 2026-07) →
 * `{"status": "aborted", "aborted": n}`; `POST /update_weight_version` `{new_version}` and
 * `GET /weight_info` (PR #49040, 2026-07). While paused, new requests wait (vLLM freezes them
 * until `/resume`). `mode=keep` (freeze the requests in flight mid-generation) is not simulated and
 * is refused with a 400 saying so.
 *
 * @example
 * ```ts
 * const routes = { ...vllmControlRoutes(engine) };
 * ```
 */
export function vllmControlRoutes(engine: SimEngineCore): Record<string, Record<string, Handler>> {
  return {
    "/pause": {
      POST: async (req, res) => {
        const q = queryOf(req);
        const waitDeprecated = queryBool(q, "wait_for_inflight_requests", false);
        const mode = q.get("mode") ?? (waitDeprecated ? "wait" : "abort");
        const clearCache = queryBool(q, "clear_cache", true);
        if (mode !== "abort" && mode !== "wait" && mode !== "keep")
          throw new HttpError(422, `mode: Input should be 'abort', 'wait' or 'keep', got '${mode}'`);
        if (mode === "keep") {
          sendJson(res, 400, { error: `mode=keep is not simulated by ${SIMULATOR_ID}; use abort or wait` });
          return;
        }
        // New requests wait from now on; `abort` ends those in flight (they answer
        // finish_reason "abort" with their partial output), `wait` lets them finish first.
        engine.pause();
        if (mode === "abort") engine.gpu.abort();
        else await idle(engine);
        if (clearCache && !engine.gpu.busy) engine.cache.clear();
        sendJson(res, 200, { status: "paused" });
      },
    },
    "/resume": {
      POST: async (_req, res) => {
        engine.resume();
        sendJson(res, 200, { status: "resumed" });
      },
    },
    "/is_paused": { GET: async (_req, res) => sendJson(res, 200, { is_paused: engine.paused }) },
    "/abort_requests": {
      // Ids are vLLM's external request ids (`chatcmpl-…`); none given aborts everything.
      POST: async (req, res) => {
        const b = parseBody(VllmAbortBody, await body(req));
        const ids = b.request_ids ?? [];
        let aborted: number;
        if (ids.length > 0) {
          for (const id of ids) engine.gpu.abort(id);
          aborted = ids.length;
        } else aborted = engine.gpu.abort();
        sendJson(res, 200, { status: "aborted", aborted });
      },
    },
    "/update_weight_version": {
      POST: async (req, res) => {
        const b = parseBody(VllmWeightVersionBody, await body(req));
        engine.weightVersion = b.new_version;
        sendJson(res, 200, { success: true, new_version: b.new_version });
      },
    },
    "/weight_info": {
      GET: async (_req, res) => sendJson(res, 200, { weight_version: engine.weightVersion }),
    },
  };
}

/**
 * The control routes, keyed by path then method.
 *
 * @example
 * ```ts
 * const routes = { ...controlRoutes(engine, { model: "Qwen/Qwen3-0.6B" }) };
 * ```
 */
export function controlRoutes(
  engine: SimEngineCore,
  config: Record<string, unknown> & { model: string },
): Record<string, Record<string, Handler>> {
  const tok = engine.tokenizer;
  const registry = metricsRegistry(engine, config.model);
  const flush: Handler = async (_req, res) => {
    const message =
      "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n";
    // SGLang refuses to flush while requests run or wait: the radix tree is in use.
    const busy = engine.gpu.busy;
    if (!busy) engine.cache.clear();
    res.writeHead(busy ? 400 : 200, { "content-type": "text/plain" });
    res.end(message);
  };
  const tokenize: Handler = async (req, res) => {
    const b = parseBody(TokenizeBody, await body(req));
    if ((b.prompt === undefined) === (b.messages === undefined))
      throw new HttpError(400, "prompt / messages: give exactly one of prompt or messages");
    let tokens: number[] | number[][];
    if (b.messages) {
      const text = tok.render(b.messages as never, {
        ...(b.tools ? { tools: sglangToolDumps(b.tools as never) } : {}),
        addGenerationPrompt: b.add_generation_prompt ?? true,
        ...(b.chat_template_kwargs ? { templateKwargs: b.chat_template_kwargs } : {}),
      });
      tokens = tok.encode(text);
    } else {
      // Qwen3 adds no BOS, so add_special_tokens changes nothing here.
      tokens = Array.isArray(b.prompt) ? b.prompt.map((p) => tok.encode(p)) : tok.encode(b.prompt!);
    }
    const count = Array.isArray(tokens[0]) ? (tokens as number[][]).map((t) => t.length) : tokens.length;
    sendJson(res, 200, { tokens, count, max_model_len: engine.contextLength });
  };
  const detokenize: Handler = async (req, res) => {
    const b = parseBody(DetokenizeBody, await body(req));
    const bad = b.tokens.findIndex((id) => id < 0 || id >= tok.vocabSize);
    if (bad !== -1)
      throw new HttpError(400, `tokens[${bad}]: token id ${b.tokens[bad]} is outside the vocabulary`);
    sendJson(res, 200, { text: tok.decode(b.tokens, { skipSpecialTokens: b.skip_special_tokens ?? false }) });
  };
  const serverInfo: Handler = async (_req, res) => {
    const stats = engine.gpu.stats();
    sendJson(res, 200, {
      ...config,
      model_path: config.model,
      served_model_name: config.model,
      context_length: engine.contextLength,
      max_running_requests: stats.max_running_requests || null,
      weight_version: engine.weightVersion,
      paused: engine.paused,
      internal_states: [{ num_running_reqs: stats.running, num_waiting_reqs: stats.waiting }],
      version: `${SIMULATOR_ID} (simulates SGLang 0.5.13)`,
      simulator: true,
    });
  };
  const routes: Record<string, Record<string, Handler>> = {
    "/abort_request": {
      POST: async (req, res) => {
        const b = parseBody(AbortBody, await body(req));
        if (!b.abort_all && !b.rid) throw new HttpError(400, "rid: give a rid, or abort_all: true");
        const aborted = engine.gpu.abort(b.abort_all ? undefined : b.rid);
        sendJson(res, 200, { success: true, aborted });
      },
    },
    "/pause_generation": {
      // SGLang's default mode is "abort": requests in flight end aborted; the others keep them.
      POST: async (req, res) => {
        const b = parseBody(PauseBody, await optionalBody(req));
        engine.pause();
        const aborted = (b.mode ?? "abort") === "abort" ? engine.gpu.abort() : 0;
        sendJson(res, 200, { success: true, message: "generation paused", aborted });
      },
    },
    "/continue_generation": {
      POST: async (_req, res) => {
        engine.resume();
        sendJson(res, 200, { success: true, message: "generation continued" });
      },
    },
    "/update_weights_from_disk": {
      // No weights to load: the weight version moves on, as after a real update.
      POST: async (req, res) => {
        const b = parseBody(UpdateWeightsBody, await body(req));
        if (b.abort_all_requests) engine.gpu.abort();
        engine.weightVersion = b.weight_version ?? nextWeightVersion(engine.weightVersion);
        sendJson(res, 200, {
          success: true,
          message: `simulated weight update (${b.model_path ?? config.model}); weight_version ${engine.weightVersion}`,
          num_paused_requests: 0,
        });
      },
    },
    "/update_weight_version": {
      // SGLang's way to relabel the weights in place (a trainer that pushes tensors itself).
      POST: async (req, res) => {
        const b = parseBody(UpdateWeightVersionBody, await body(req));
        if (b.abort_all_requests) engine.gpu.abort();
        engine.weightVersion = b.new_version;
        sendJson(res, 200, { success: true, message: `weight_version ${engine.weightVersion}` });
      },
    },
    "/flush_cache": { GET: flush, POST: flush },
    "/v1/loads": {
      GET: async (_req, res) => {
        const st = engine.gpu.stats();
        sendJson(res, 200, {
          timestamp: new Date().toISOString(),
          num_running_reqs: st.running,
          num_waiting_reqs: st.waiting,
          loads: [{ dp_rank: 0, num_running_reqs: st.running, num_waiting_reqs: st.waiting }],
        });
      },
    },
    "/sim/faults": {
      // The simulator's own control (no SGLang route): fault bursts for the fault tests.
      GET: async (_req, res) => sendJson(res, 200, engine.gpu.setFaults({})),
      POST: async (req, res) => {
        const b = parseBody(SimFaultsBody, await body(req));
        const faults = engine.gpu.setFaults({
          ...(b.error_rate !== undefined ? { errorRate: b.error_rate } : {}),
          ...(b.stall_rate !== undefined ? { stallRate: b.stall_rate } : {}),
          ...(b.stall_ms !== undefined ? { stallMs: b.stall_ms } : {}),
          ...(b.abort_rate !== undefined ? { abortRate: b.abort_rate } : {}),
        });
        sendJson(res, 200, faults);
      },
    },
    "/sim/stats": {
      GET: async (_req, res) =>
        sendJson(res, 200, {
          simulator: SIMULATOR_ID,
          config,
          ...engine.gpu.stats(),
          images: engine.images.snapshot(),
        }),
    },
    "/metrics": {
      GET: async (_req, res) => {
        const text = await registry.metrics();
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(text);
      },
    },
    "/server_info": { GET: serverInfo },
    "/get_server_info": { GET: serverInfo },
    "/v1/tokenize": { POST: tokenize },
    "/tokenize": { POST: tokenize },
    "/v1/detokenize": { POST: detokenize },
    "/detokenize": { POST: detokenize },
  };
  if (config.flavor === "vllm" || config.flavor === "vllm-0.10.1") {
    for (const path of SGLANG_ONLY_ROUTES) delete routes[path];
    // 0.10.1 predates the pause routes (PR #28037, 2025-11): it has no control route to offer.
    if (config.flavor === "vllm") Object.assign(routes, vllmControlRoutes(engine));
  }
  return routes;
}
