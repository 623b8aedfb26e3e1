/**
 * `topology.yaml` for `polar serve_gateway -c`: a strict schema (an unknown key is an error
 * naming it) that accepts upstream Polar's layout — `rollout:` and `gateway.nodes[]` with
 * `max_*_workers`, `inference.{engine, base_url}`, `model_served`, `default_runtime` — and maps
 * it onto {@link GatewayOptions}. `${VAR}` in any string is replaced from the environment (as
 * upstream examples render topologies with envsubst); an unset variable is an error naming the key.
 *
 * Mapping: `gateway.control_plane_url` (upstream alias `gateway.rollout_server_url`, default
 * `rollout.public_url`) → the control plane; `nodes[].host/port` → this gateway's operator HTTP
 * server (`/health`, `/metrics`); `inference.engine` `sglang` → `sglang-openai`. Accepted for
 * compatibility and not used: `rollout.*` other than `public_url`, `heartbeat_interval_seconds`
 * (the control plane sets the ping interval), `completion_persistence` (records are uploaded as
 * artifacts), `nodes[].public_url`.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { Identifier, RuntimeSpec } from "../protocol";
import { ENGINE_PRIORITY_SETTINGS } from "../proxy/engine-priority";
import type { GatewayOptions } from "./gateway";

const Url = z
  .string()
  .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), "must be an http(s) URL")
  .transform((u) => u.replace(/\/+$/, ""));
const Workers = z.number().int().min(1).max(4096);

const NodeSpec = z.strictObject({
  id: Identifier,
  host: z.string().min(1).default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).optional(),
  public_url: z.string().optional(),
  model_served: z.string().min(1),
  inference: z.strictObject({
    engine: z.string().min(1).default("sglang"),
    base_url: Url,
    base_urls: z.array(Url).optional(),
    request_timeout_seconds: z.number().positive().optional(),
    // Whether tasks' engine_priority is sent, and in which order (proxy/engine-priority.ts).
    engine_priority: z.enum(ENGINE_PRIORITY_SETTINGS).optional(),
    // Token mode: continue a turn an abort fence cut (true, the default) or issue it again.
    partial_rollouts: z.boolean().optional(),
    // How long a model call is retried while no replica is available (seconds; 0 = none).
    engine_retry_seconds: z.number().min(0).optional(),
    // Token mode (`engine: sglang`) only; the proxy validates parser names at start-up.
    model_family: z.string().min(1).optional(),
    tokenizer_path: z.string().min(1).optional(),
    chat_template: z.string().min(1).optional(),
    tool_call_parser: z.string().min(1).optional(),
    reasoning_parser: z.string().min(1).optional(),
    context_length: z.number().int().min(2).optional(),
    on_template_mismatch: z.enum(["bridge", "new_chain"]).optional(),
    delegate_parsing: z.boolean().optional(),
    // Record the experts the MoE router picked per token: the model's num_hidden_layers and num_experts_per_tok.
    routed_experts: z
      .strictObject({ layers: z.number().int().min(1), top_k: z.number().int().min(1) })
      .transform((r) => ({ layers: r.layers, topK: r.top_k }))
      .optional(),
  }),
  max_init_workers: Workers.default(4),
  max_run_workers: Workers.default(2),
  max_postrun_workers: Workers.default(4),
  default_runtime: RuntimeSpec.nullable().default(null),
});

/** The topology file's schema. */
export const Topology = z.strictObject({
  rollout: z
    .strictObject({
      host: z.string().optional(),
      port: z.number().int().min(1).max(65535).optional(),
      public_url: Url.optional(),
      save_dir: z.string().nullable().optional(),
      dispatch_poll_interval_seconds: z.number().positive().optional(),
      callback_grace_seconds: z.number().min(0).optional(),
    })
    .optional(),
  gateway: z.strictObject({
    control_plane_url: Url.optional(),
    rollout_server_url: Url.optional(),
    queue: Identifier.default("default"),
    work_root: z.string().min(1).optional(),
    keep_workspaces: z.boolean().default(false),
    keep_failed_sessions: z.number().int().min(0).max(100_000).optional(),
    heartbeat_interval_seconds: z.number().positive().optional(),
    completion_persistence: z
      .strictObject({
        enabled: z.boolean().optional(),
        max_field_bytes: z.number().int().positive().optional(),
        queue_size: z.number().int().positive().optional(),
      })
      .optional(),
    runtimes: z
      .strictObject({
        local: z
          .strictObject({
            sandbox: z.enum(["auto", "always", "never"]).default("auto"),
            bwrap_path: z.string().min(1).default("bwrap"),
          })
          .optional(),
        docker: z
          .strictObject({
            cli: z.string().min(1).default("docker"),
            global_args: z.array(z.string()).default([]),
            create_args: z.array(z.string()).default([]),
          })
          .optional(),
        apptainer: z.strictObject({ cli: z.string().min(1).default("apptainer") }).optional(),
      })
      .optional(),
    nodes: z
      .array(NodeSpec)
      .min(1)
      .superRefine((nodes, ctx) => {
        const seen = new Set<string>();
        nodes.forEach((n, i) => {
          if (seen.has(n.id))
            ctx.addIssue({ code: "custom", path: [i, "id"], message: `duplicate node id '${n.id}'` });
          seen.add(n.id);
        });
      }),
  }),
});
export type Topology = z.infer<typeof Topology>;

/** A topology file problem; the message names the file and the key. */
export class TopologyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TopologyError";
  }
}

const keyPath = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>(
    (acc, p) => (typeof p === "number" ? `${acc}[${p}]` : acc ? `${acc}.${String(p)}` : String(p)),
    "",
  );

/** Replaces `${VAR}` in every string, naming the key of an unset variable. */
function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, path: PropertyKey[] = []): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
      const v = env[name];
      if (v === undefined)
        throw new TopologyError(`${keyPath(path)}: environment variable ${name} is not set`);
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substituteEnv(v, env, [...path, i]));
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, substituteEnv(v, env, [...path, k])]),
    );
  return value;
}

/**
 * Upstream engine names → the proxy's. Empty today: upstream's `sglang` is the proxy's `sglang`
 * (token mode, the default for SGLang); write `sglang-openai` to keep SGLang's chat endpoint.
 */
export const ENGINE_ALIASES: Readonly<Record<string, string>> = {};

/** `inference.*` keys that only the token mode (`engine: sglang`) reads. */
export const TOKEN_MODE_KEYS = [
  ["model_family", "modelFamily"],
  ["tokenizer_path", "tokenizerPath"],
  ["chat_template", "chatTemplate"],
  ["tool_call_parser", "toolCallParser"],
  ["reasoning_parser", "reasoningParser"],
  ["context_length", "contextLength"],
  ["on_template_mismatch", "onTemplateMismatch"],
  ["delegate_parsing", "delegateParsing"],
  ["routed_experts", "routedExperts"],
] as const;

/**
 * Parses a topology document (YAML text) strictly.
 *
 * @example
 * ```ts
 * const topology = parseTopology(readFileSync("topology.yaml", "utf8"), "topology.yaml");
 * ```
 */
export function parseTopology(
  text: string,
  source = "topology.yaml",
  env: NodeJS.ProcessEnv = process.env,
): Topology {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new TopologyError(`${source}: not valid YAML: ${(err as Error).message}`);
  }
  let substituted: unknown;
  try {
    substituted = substituteEnv(raw, env);
  } catch (err) {
    throw new TopologyError(`${source}: ${(err as Error).message}`);
  }
  const parsed = Topology.safeParse(substituted);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => {
      const key = keyPath(i.path) || "(document)";
      const unknown = i.code === "unrecognized_keys" ? ` ${i.keys.map((k) => `'${k}'`).join(", ")}` : "";
      return `${key}: ${i.message}${unknown}`;
    });
    throw new TopologyError(`${source}: ${issues.join("; ")}`);
  }
  return parsed.data;
}

type TopologyNode = Topology["gateway"]["nodes"][number];

/** The node `nodeId` names, or the only one. */
function pickNode(nodes: TopologyNode[], nodeId: string | undefined, source: string): TopologyNode {
  let node = nodes[0];
  if (nodeId !== undefined) {
    node = nodes.find((n) => n.id === nodeId);
    if (!node)
      throw new TopologyError(
        `--node-id: '${nodeId}' is not in ${source} (gateway.nodes ids: ${nodes.map((n) => n.id).join(", ")})`,
      );
  } else if (nodes.length > 1) {
    throw new TopologyError(`${source} has ${nodes.length} nodes: choose one with --node-id`);
  }
  if (!node) throw new TopologyError(`${source}: gateway.nodes is empty`);
  return node;
}

/** The token-mode options of a node; refused on a chat engine (all but the tokenizer folder). */
function tokenModeOf(node: TopologyNode, engine: string, where: string): Partial<GatewayOptions> {
  const tokenMode: Partial<GatewayOptions> = {};
  for (const [key, option] of TOKEN_MODE_KEYS) {
    const value = node.inference[key];
    if (value === undefined) continue;
    // The tokenizer folder also gives chat engines exact `count_tokens` answers; the rest is
    // token mode only, and silently ignoring it would hide a misconfigured node.
    if (engine !== "sglang" && key !== "tokenizer_path")
      throw new TopologyError(
        `${where}.inference.${key}: only applies to engine 'sglang' (token mode), not '${engine}'`,
      );
    Object.assign(tokenMode, { [option]: value });
  }
  return tokenMode;
}

/** The optional inference settings of a node, as gateway options (only those set). */
function inferenceOptions(inference: TopologyNode["inference"]): Partial<GatewayOptions> {
  return {
    ...(inference.request_timeout_seconds
      ? { requestTimeoutMs: inference.request_timeout_seconds * 1000 }
      : {}),
    ...(inference.engine_priority ? { enginePriority: inference.engine_priority } : {}),
    ...(inference.partial_rollouts === undefined ? {} : { partialRollouts: inference.partial_rollouts }),
    ...(inference.engine_retry_seconds === undefined
      ? {}
      : { engineRetryMs: inference.engine_retry_seconds * 1000 }),
  };
}

/** The runtimes' gateway-wide settings (only those the topology names). */
function runtimeSettingsOf(rt: Topology["gateway"]["runtimes"]): GatewayOptions["runtimeSettings"] {
  return {
    ...(rt?.local ? { local: { sandbox: rt.local.sandbox, bwrapPath: rt.local.bwrap_path } } : {}),
    ...(rt?.docker
      ? {
          docker: {
            cli: rt.docker.cli,
            globalArgs: rt.docker.global_args,
            createArgs: rt.docker.create_args,
          },
        }
      : {}),
    ...(rt?.apptainer ? { apptainer: { cli: rt.apptainer.cli } } : {}),
  };
}

/**
 * The gateway options of one node of a topology (`nodeId` required when there are several).
 *
 * @example
 * ```ts
 * const opts = gatewayOptionsFromTopology(topology, "gpu-0", token);
 * await startGateway(opts);
 * ```
 */
export function gatewayOptionsFromTopology(
  t: Topology,
  nodeId: string | undefined,
  token: string,
  source = "topology.yaml",
): GatewayOptions {
  const nodes = t.gateway.nodes;
  const node = pickNode(nodes, nodeId, source);
  const controlPlaneUrl =
    t.gateway.control_plane_url ?? t.gateway.rollout_server_url ?? t.rollout?.public_url;
  if (!controlPlaneUrl)
    throw new TopologyError(
      `${source}: gateway.control_plane_url is required (or upstream's gateway.rollout_server_url / rollout.public_url)`,
    );
  const engine = ENGINE_ALIASES[node.inference.engine] ?? node.inference.engine;
  const tokenMode = tokenModeOf(node, engine, `${source}: gateway.nodes[${nodes.indexOf(node)}]`);
  return {
    controlPlaneUrl,
    nodeId: node.id,
    token,
    queue: t.gateway.queue,
    engine: engine as GatewayOptions["engine"],
    engineUrl: node.inference.base_url,
    ...(node.inference.base_urls ? { engineUrls: node.inference.base_urls } : {}),
    model: node.model_served,
    maxInit: node.max_init_workers,
    maxRun: node.max_run_workers,
    maxPostrun: node.max_postrun_workers,
    workRoot: t.gateway.work_root,
    keepWorkspaces: t.gateway.keep_workspaces,
    ...(t.gateway.keep_failed_sessions !== undefined
      ? { keepFailedSessions: t.gateway.keep_failed_sessions }
      : {}),
    defaultRuntime: node.default_runtime,
    ...tokenMode,
    ...inferenceOptions(node.inference),
    ...(node.port !== undefined ? { http: { host: node.host, port: node.port } } : {}),
    runtimeSettings: runtimeSettingsOf(t.gateway.runtimes),
  };
}

/**
 * Reads and parses a topology file.
 *
 * @example
 * ```ts
 * const topology = loadTopology("examples/topology.yaml");
 * ```
 */
export function loadTopology(file: string, env: NodeJS.ProcessEnv = process.env): Topology {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new TopologyError(`-c: cannot read '${file}': ${(err as Error).message}`);
  }
  return parseTopology(text, file, env);
}
