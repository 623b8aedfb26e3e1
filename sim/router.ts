/**
 * A simulated SGLang model gateway (router) in front of sim engines, mirroring `sgl-model-gateway`
 * as of SGLang main 2026-11 (`server.rs` routes, `protocols/worker_spec.rs` listing,
 * `core/worker.rs` DP-aware workers, `routers/parse.rs`):
 *
 * - `GET /workers` → `{workers: [{id, url, model_id, priority, cost, worker_type, is_healthy, load,
 *   connection_mode}], total, stats}`; with `dpSize` each engine is listed once per data-parallel
 *   rank as `url@rank` (`--dp-aware`), and `grpcWorkers` are listed with `connection_mode: "gRPC"`.
 * - `POST /generate` and `POST /v1/chat/completions` go to the worker the policy picks:
 *   `consistent_hashing` and `manual` route by `X-SMG-Routing-Key`, `cache_aware` (the default),
 *   `round_robin` and the others ignore it (here: plain rotation, so ignoring it shows). A DP-aware
 *   pick sends `routed_dp_rank`. Like the typed chat path, chat answers lose the top-level
 *   `prompt_token_ids` extension.
 * - `POST /parse/function_call` `{text, tool_call_parser, tools}` →
 *   `{remaining_text, tool_calls: [{function: {name, arguments}}], success}` and
 *   `POST /parse/reasoning` `{text, reasoning_parser}` → `{normal_text, reasoning_text, success}`,
 *   with the router's parser names (`qwen`, `qwen_coder`; `qwen3`, `qwen3_thinking`,
 *   `deepseek_r1`); an unknown name is a 400 `{error: "Unknown tool parser: …", success: false}`.
 * - `GET /health` is the router's liveness (200 `OK`, no generation). Every other path, among them
 *   `/abort_request`, which the router does not have, answers its fallback: 404, empty body.
 *
 * @module
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { ToolDefinition } from "../tokenizer/chat-tokenizer";
import { SIM_TOOL_PARSERS, splitReasoning, splitToolCalls } from "./parse-api";
import { hash32 } from "./policy";

/** Routing policies the simulated router knows (a subset of the router's `--policy`). */
export type SimRouterPolicy = "cache_aware" | "round_robin" | "consistent_hashing" | "manual";

/** Options of {@link startSimRouter}. */
export interface SimRouterOptions {
  /** Base URLs of the (HTTP) sim engines behind the router. */
  workers: string[];
  port?: number;
  /** Routing policy; default `cache_aware`, the router's default. */
  policy?: SimRouterPolicy;
  /** List each worker once per DP rank `0…dpSize-1` as `url@rank` (`--dp-aware`); default 1 (off). */
  dpSize?: number;
  /** Extra workers listed as gRPC (never called; a proxy must not call them over HTTP). */
  grpcWorkers?: string[];
  /**
   * How `workers` are listed; default `HTTP`. `gRPC` stands for a router whose workers all speak
   * gRPC: it still forwards (here over HTTP, in place of its gRPC client), but a proxy must call
   * the router itself.
   */
  connectionMode?: "HTTP" | "gRPC";
}

/** A running simulated router. */
export interface SimRouterHandle {
  url: string;
  /** Requests forwarded (`/generate` and chat), per listed worker URL (`url@rank` when DP-aware). */
  forwarded: Map<string, number>;
  /** Requests that reached a path the router does not serve (404), e.g. `/abort_request`. */
  notFound: string[];
  /** Every request, as `METHOD /path`. */
  requests: string[];
  close(): Promise<void>;
}

/** Router tool-parser names (its tool-parser factory) → the sim's parser of that format. */
const ROUTER_TOOL_PARSERS: Readonly<Record<string, keyof typeof SIM_TOOL_PARSERS>> = {
  qwen: "qwen25",
  qwen_json: "qwen25",
  json: "qwen25",
  qwen_coder: "qwen3_coder",
  qwen_xml: "qwen3_coder",
};
/** Router reasoning-parser names → whether the output starts inside the think block. */
const ROUTER_REASONING_PARSERS: Readonly<Record<string, boolean>> = {
  qwen3: false,
  qwen3_thinking: true,
  deepseek_r1: true,
};

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Starts the router on 127.0.0.1 (port 0 by default).
 *
 * @example
 * ```ts
 * const router = await startSimRouter({ workers: [a.url, b.url], policy: "consistent_hashing", dpSize: 2 });
 * await fetch(`${router.url}/workers`); // http://…:a@0, http://…:a@1, http://…:b@0, http://…:b@1
 * await router.close();
 * ```
 */
export async function startSimRouter(opts: SimRouterOptions): Promise<SimRouterHandle> {
  const forwarded = new Map<string, number>();
  const notFound: string[] = [];
  const requests: string[] = [];
  const policy = opts.policy ?? "cache_aware";
  const dpSize = Math.max(1, opts.dpSize ?? 1);
  const dpAware = (opts.dpSize ?? 1) > 1;
  // The callable workers: one per (engine, rank) when DP-aware.
  const targets = opts.workers.flatMap((base) =>
    dpAware
      ? Array.from({ length: dpSize }, (_, rank) => ({ id: `${base}@${rank}`, base, rank }))
      : [{ id: base, base, rank: null as number | null }],
  );
  const sticky = new Map<string, (typeof targets)[number]>();
  let rotation = 0;
  const pick = (req: IncomingMessage) => {
    const key = req.headers["x-smg-routing-key"];
    const k = typeof key === "string" && key !== "" ? key : null;
    if (k !== null && policy === "consistent_hashing") return targets[hash32(k) % targets.length]!;
    if (k !== null && policy === "manual") {
      // `manual`: the first pick of a key sticks to it.
      const known = sticky.get(k) ?? targets[rotation++ % targets.length]!;
      sticky.set(k, known);
      return known;
    }
    return targets[rotation++ % targets.length]!;
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const path = (req.url ?? "/").split("?")[0];
      requests.push(`${req.method} ${path}`);
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      const body = (): Record<string, unknown> | null => {
        try {
          const v: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          return isObject(v) ? v : null;
        } catch {
          return null;
        }
      };
      if (req.method === "GET" && path === "/workers") {
        const listed = [
          ...targets.map((t) => ({ url: t.id, mode: opts.connectionMode ?? "HTTP" })),
          ...(opts.grpcWorkers ?? []).map((url) => ({ url, mode: "gRPC" })),
        ];
        json(200, {
          workers: listed.map((w, i) => ({
            id: `worker-${i}`,
            url: w.url,
            model_id: "default",
            priority: 50,
            cost: 1,
            worker_type: "regular",
            is_healthy: true,
            load: 0,
            connection_mode: w.mode,
          })),
          total: listed.length,
          stats: {
            total_workers: listed.length,
            healthy_workers: listed.length,
            total_models: 1,
            total_load: 0,
            by_type: { regular: listed.length, prefill: 0, decode: 0 },
          },
        });
        return;
      }
      if (req.method === "GET" && path === "/health") {
        res.writeHead(200, { "content-type": "text/plain" }).end("OK");
        return;
      }
      if (req.method === "POST" && (path === "/generate" || path === "/v1/chat/completions")) {
        const target = pick(req);
        forwarded.set(target.id, (forwarded.get(target.id) ?? 0) + 1);
        const parsed = body();
        const forwardBody =
          parsed && target.rank !== null ? { ...parsed, routed_dp_rank: target.rank } : (parsed ?? {});
        fetch(`${target.base}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(forwardBody),
        })
          .then(async (r) => {
            const answer = (await r.json()) as { choices?: Array<Record<string, unknown>> };
            if (path !== "/generate") for (const c of answer.choices ?? []) delete c.prompt_token_ids;
            json(r.status, answer);
          })
          .catch((error: unknown) =>
            json(502, { error: { message: `worker ${target.id}: ${String(error)}` } }),
          );
        return;
      }
      if (req.method === "POST" && path === "/parse/function_call") {
        const b = body() ?? {};
        const name = String(b.tool_call_parser ?? "");
        const sim = ROUTER_TOOL_PARSERS[name];
        if (!sim || typeof b.text !== "string" || !Array.isArray(b.tools)) {
          json(400, {
            error: sim ? "text and tools are required" : `Unknown tool parser: ${name}`,
            success: false,
          });
          return;
        }
        const tools = b.tools.filter(
          (t): t is ToolDefinition =>
            isObject(t) && isObject(t.function) && typeof t.function.name === "string",
        );
        const split = splitToolCalls(SIM_TOOL_PARSERS[sim]!, b.text, tools);
        json(200, {
          remaining_text: split.text,
          tool_calls: split.calls.map((c) => ({ function: { name: c.name, arguments: c.arguments } })),
          success: true,
        });
        return;
      }
      if (req.method === "POST" && path === "/parse/reasoning") {
        const b = body() ?? {};
        const name = String(b.reasoning_parser ?? "");
        const forced = ROUTER_REASONING_PARSERS[name];
        if (forced === undefined || typeof b.text !== "string") {
          json(400, {
            error: forced === undefined ? `Unknown reasoning parser: ${name}` : "text is required",
            success: false,
          });
          return;
        }
        const split = splitReasoning(b.text, forced);
        json(200, { normal_text: split.text, reasoning_text: split.reasoning, success: true });
        return;
      }
      // The router's fallback (`sink_handler`): 404 with an empty body.
      notFound.push(`${req.method} ${path}`);
      res.writeHead(404, { "content-length": 0 }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    forwarded,
    notFound,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
