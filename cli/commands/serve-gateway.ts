/**
 * `polar serve_gateway`: the gateway agent of one GPU host, configured by flags or by a topology
 * file (`-c topology.yaml --node-id ID`; flags given with `-c` override the file).
 *
 * @module
 */
import {
  DEFAULT_RECONNECT,
  type Gateway,
  type GatewayOptions,
  type GatewayRefusedError,
  jsonLogger,
  startGateway,
} from "../../gateway-agent";
import { gatewayOptionsFromTopology, loadTopology, TopologyError } from "../../gateway-agent/topology";
import { EnginePriorityError } from "../../proxy/engine-priority";
import { ENGINE_NAMES } from "../../proxy/engines";
import { TokenModeConfigError } from "../../proxy/engines/sglang-token/mode";
import { TokenizerLoadError } from "../../tokenizer/chat-tokenizer";
import { parseRoutedExperts, type TokenModeFlags } from "../token-mode-flags";
import { UsageError } from "../usage-error";
import { enginePriorityFlag } from "./proxy";

export interface ServeGatewayOptions extends TokenModeFlags {
  /** Topology file (`-c`). */
  config?: string;
  controlPlane?: string;
  nodeId?: string;
  queue?: string;
  engine?: string;
  engineUrl?: string;
  model?: string;
  maxInit?: number;
  maxRun?: number;
  maxPostrun?: number;
  workRoot?: string;
  keepWorkspaces?: boolean;
  /** Failed sessions whose logs are kept under `work_root/failed/` (0 = none). */
  keepFailedSessions?: number;
  /** Operator HTTP port (`/health`, `/metrics`); 0 = any free port. */
  httpPort?: number;
  httpHost?: string;
  /** `json` (default with -c) or `text` logs. */
  logFormat?: "json" | "text";
  /** No new sessions while the result journal holds more than this many MiB. */
  journalMaxMb?: number;
  /** Dial timeout of the control-plane socket (seconds). */
  connectTimeoutSeconds?: number;
  /** Longest wait between reconnect attempts (seconds). */
  reconnectMaxSeconds?: number;
  /** Longest hold of a call for its task's `min_policy_version` (seconds; 0 = fail at once). */
  policyVersionWait?: number;
  /** Whether and how tasks' `engine_priority` is sent: auto | off | higher_first | lower_first. */
  enginePriority?: string;
  /** `--no-partial-rollouts` gives false (commander's default for the negated flag is true). */
  partialRollouts?: boolean;
  /** Longest retry of a model call while no engine replica is available (seconds; 0 = none). */
  engineRetrySeconds?: number;
}

/** The link flags (`--journal-max-mb`, `--connect-timeout-seconds`, `--reconnect-max-seconds`), checked. */
function linkFlags(opts: ServeGatewayOptions, base: Partial<GatewayOptions>): Partial<GatewayOptions> {
  const out: Partial<GatewayOptions> = {};
  const positive = (flag: string, v: number) => {
    if (!Number.isFinite(v) || v <= 0) throw new UsageError(`${flag}: must be a number > 0, got '${v}'`);
    return v;
  };
  if (opts.journalMaxMb !== undefined)
    out.journalMaxBytes = positive("--journal-max-mb", Number(opts.journalMaxMb)) * 1024 * 1024;
  if (opts.connectTimeoutSeconds !== undefined)
    out.connectTimeoutMs = positive("--connect-timeout-seconds", Number(opts.connectTimeoutSeconds)) * 1000;
  if (opts.reconnectMaxSeconds !== undefined) {
    const max = positive("--reconnect-max-seconds", Number(opts.reconnectMaxSeconds)) * 1000;
    const initial = Math.min(base.reconnect?.initialDelayMs ?? DEFAULT_RECONNECT.initialDelayMs, max);
    out.reconnect = { initialDelayMs: initial, maxDelayMs: max };
  }
  return out;
}

/** Token-mode options: flag and topology key of each (errors name both). */
const TOKEN_OPTIONS = [
  ["modelFamily", "--model-family", "model_family"],
  ["tokenizerPath", "--tokenizer-path", "tokenizer_path"],
  ["chatTemplate", "--chat-template", "chat_template"],
  ["toolCallParser", "--tool-call-parser", "tool_call_parser"],
  ["reasoningParser", "--reasoning-parser", "reasoning_parser"],
  ["contextLength", "--context-length", "context_length"],
  ["delegateParsing", "--delegate-parsing", "delegate_parsing"],
  ["onTemplateMismatch", "--on-template-mismatch", "on_template_mismatch"],
  ["routedExperts", "--routed-experts", "routed_experts"],
] as const;

/** The token-mode flags given, checked; throws {@link UsageError} naming the flag. */
function tokenModeFlags(opts: ServeGatewayOptions): Partial<GatewayOptions> {
  const out: Partial<GatewayOptions> = {};
  if (opts.modelFamily !== undefined) out.modelFamily = opts.modelFamily;
  if (opts.tokenizerPath !== undefined) out.tokenizerPath = opts.tokenizerPath;
  if (opts.chatTemplate !== undefined) out.chatTemplate = opts.chatTemplate;
  if (opts.toolCallParser !== undefined) out.toolCallParser = opts.toolCallParser;
  if (opts.reasoningParser !== undefined) out.reasoningParser = opts.reasoningParser;
  if (opts.contextLength !== undefined) {
    const n = Number(opts.contextLength);
    if (!Number.isInteger(n) || n < 2)
      throw new UsageError(`--context-length: must be an integer >= 2, got '${opts.contextLength}'`);
    out.contextLength = n;
  }
  if (opts.delegateParsing) out.delegateParsing = true;
  const mismatch = opts.onTemplateMismatch;
  if (mismatch !== undefined) {
    if (mismatch !== "bridge" && mismatch !== "new_chain")
      throw new UsageError(`--on-template-mismatch: '${mismatch}' is not one of bridge, new_chain`);
    out.onTemplateMismatch = mismatch;
  }
  if (opts.routedExperts !== undefined) {
    try {
      out.routedExperts = parseRoutedExperts(opts.routedExperts);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
  }
  return out;
}

const isHttpUrl = (value: string) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);

/**
 * Resolves flags and/or a topology file into gateway options; every error names the flag or key.
 *
 * @example
 * ```ts
 * const opts = resolveServeGatewayOptions({ config: "topology.yaml", nodeId: "gpu-0" }, token);
 * ```
 */
export function resolveServeGatewayOptions(opts: ServeGatewayOptions, token: string): GatewayOptions {
  let base: Partial<GatewayOptions> = {};
  if (opts.config) {
    try {
      base = gatewayOptionsFromTopology(loadTopology(opts.config), opts.nodeId, token, opts.config);
    } catch (err) {
      if (err instanceof TopologyError) throw new UsageError(err.message);
      throw err;
    }
  }
  const merged: Partial<GatewayOptions> = {
    ...base,
    token,
    ...(opts.controlPlane !== undefined ? { controlPlaneUrl: opts.controlPlane } : {}),
    ...(opts.nodeId !== undefined ? { nodeId: opts.nodeId } : {}),
    ...(opts.queue !== undefined ? { queue: opts.queue } : {}),
    ...(opts.engine !== undefined ? { engine: opts.engine as GatewayOptions["engine"] } : {}),
    ...(opts.engineUrl !== undefined ? { engineUrl: opts.engineUrl } : {}),
    ...(opts.model !== undefined ? { model: opts.model } : {}),
    ...(opts.maxInit !== undefined ? { maxInit: opts.maxInit } : {}),
    ...(opts.maxRun !== undefined ? { maxRun: opts.maxRun } : {}),
    ...(opts.maxPostrun !== undefined ? { maxPostrun: opts.maxPostrun } : {}),
    ...(opts.workRoot !== undefined ? { workRoot: opts.workRoot } : {}),
    ...(opts.keepWorkspaces ? { keepWorkspaces: true } : {}),
    ...(opts.keepFailedSessions !== undefined ? { keepFailedSessions: opts.keepFailedSessions } : {}),
    ...policyVersionWaitFlag(opts),
    ...enginePriorityFlag(opts.enginePriority),
    ...(opts.partialRollouts === false ? { partialRollouts: false } : {}),
    ...(opts.engineRetrySeconds === undefined ? {} : { engineRetryMs: opts.engineRetrySeconds * 1000 }),
    ...(opts.httpPort !== undefined
      ? { http: { host: opts.httpHost ?? "127.0.0.1", port: opts.httpPort } }
      : {}),
    ...tokenModeFlags(opts),
    ...linkFlags(opts, base),
  };
  const where = (flag: string, key: string) => (opts.config ? `${flag} (or ${key} in ${opts.config})` : flag);
  if (!merged.controlPlaneUrl)
    throw new UsageError(`${where("--control-plane", "gateway.control_plane_url")} is required`);
  if (!merged.nodeId) throw new UsageError(`--node-id is required`);
  if (!merged.engineUrl)
    throw new UsageError(`${where("--engine-url", "gateway.nodes[].inference.base_url")} is required`);
  if (!merged.model) throw new UsageError(`${where("--model", "gateway.nodes[].model_served")} is required`);
  // Flags alone keep SGLang's chat endpoint by default (existing command lines keep working);
  // topology files default to `sglang`, the token mode.
  const engine = merged.engine ?? "sglang-openai";
  if (!(ENGINE_NAMES as readonly string[]).includes(engine)) {
    throw new UsageError(
      `${where("--engine", "gateway.nodes[].inference.engine")}: '${engine}' is not supported; choose one of ${ENGINE_NAMES.join(", ")}`,
    );
  }
  if (engine !== "sglang") {
    for (const [key, flag, topoKey] of TOKEN_OPTIONS) {
      if (key === "tokenizerPath" || merged[key] === undefined) continue;
      throw new UsageError(
        `${where(flag, `gateway.nodes[].inference.${topoKey}`)}: only applies to --engine sglang (token mode), not '${engine}'`,
      );
    }
  }
  for (const [flag, value] of [
    [where("--control-plane", "gateway.control_plane_url"), merged.controlPlaneUrl],
    [where("--engine-url", "gateway.nodes[].inference.base_url"), merged.engineUrl],
  ] as const) {
    if (!isHttpUrl(value)) throw new UsageError(`${flag}: '${value}' is not an http(s) URL`);
  }
  return { ...(merged as GatewayOptions), engine: engine as GatewayOptions["engine"] };
}

/**
 * Runs the gateway until SIGINT/SIGTERM (then it stops taking work and closes the connection), or
 * until the control plane refuses it for good: then it throws the {@link GatewayRefusedError}
 * (the CLI prints it and exits with its `exitCode`, 78).
 *
 * @example
 * ```ts
 * await runServeGateway({ config: "examples/topology.yaml", nodeId: "gpu-0" });
 * ```
 */
export async function runServeGateway(opts: ServeGatewayOptions): Promise<void> {
  const gateway = await startServeGateway(opts);
  const refusal = await gateway.refused;
  await gateway.stop();
  throw refusal;
}

/**
 * Starts the gateway of `serve_gateway` and returns it (tests stop it themselves).
 *
 * @example
 * ```ts
 * const gateway = await startServeGateway(opts, { installSignalHandlers: false });
 * ```
 */
export async function startServeGateway(
  opts: ServeGatewayOptions,
  o: { installSignalHandlers?: boolean } = {},
): Promise<Gateway> {
  const token = process.env.POLAR_GATEWAY_TOKEN;
  if (!token) throw new UsageError("POLAR_GATEWAY_TOKEN is not set (the gateway's bearer token)");
  const resolved = resolveServeGatewayOptions(opts, token);
  const format = opts.logFormat ?? (opts.config ? "json" : "text");
  const logger =
    format === "json" ? jsonLogger({ component: "gateway", node_id: resolved.nodeId }) : undefined;
  let gateway: Gateway;
  try {
    gateway = await startGateway({ ...resolved, ...(logger ? { logger } : {}) });
  } catch (err) {
    // Token-mode start-up failures name an option or a file: say which flag (or key) that is.
    const where = (key: (typeof TOKEN_OPTIONS)[number][0]) => {
      const [, flag, topoKey] = TOKEN_OPTIONS.find(([k]) => k === key)!;
      return opts.config ? `${flag} (or gateway.nodes[].inference.${topoKey} in ${opts.config})` : flag;
    };
    if (err instanceof TokenizerLoadError)
      throw new UsageError(
        `${where(err.source === "template" ? "chatTemplate" : "tokenizerPath")}: ${err.message}`,
      );
    if (err instanceof EnginePriorityError) {
      const flag = opts.config
        ? "--engine-priority (or gateway.nodes[].inference.engine_priority)"
        : "--engine-priority";
      throw new UsageError(`${flag}: ${err.message}`);
    }
    if (err instanceof TokenModeConfigError) {
      const known = TOKEN_OPTIONS.find(([k]) => k === err.option);
      throw new UsageError(`${known ? where(known[0]) : err.option}: ${err.message}`);
    }
    throw err;
  }
  const line = {
    msg: "gateway started",
    node_id: resolved.nodeId,
    control_plane: resolved.controlPlaneUrl,
    queue: resolved.queue ?? "default",
    proxy: gateway.proxyUrl,
    engine: `${resolved.engine}${resolved.engine === "sglang" ? " (token mode)" : ""} ${resolved.engineUrl}`,
    http: gateway.httpUrl,
    work_root: gateway.workRoot,
  };
  if (logger) logger.info(line.msg, line);
  else
    console.log(
      `polar gateway ${line.node_id}: pulling from ${line.control_plane} (queue ${line.queue}), proxy at ${line.proxy}, engine ${line.engine}${line.http ? `, health/metrics at ${line.http}` : ""}`,
    );
  if (o.installSignalHandlers ?? true) {
    const stop = async () => {
      await gateway.stop();
      process.exit(0);
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  }
  return gateway;
}

/** `--policy-version-wait` (seconds, 0 allowed: fail at once) as the proxy's bound in ms. */
function policyVersionWaitFlag(opts: ServeGatewayOptions): Partial<GatewayOptions> {
  const s = opts.policyVersionWait;
  if (s === undefined) return {};
  if (typeof s !== "number" || !Number.isFinite(s) || s < 0)
    throw new UsageError("--policy-version-wait: must be a number of seconds >= 0");
  return { policyVersionWaitMs: s * 1000 };
}
