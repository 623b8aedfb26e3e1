/**
 * `polar proxy`: the recording proxy on its own, for agents run outside Polar. Sessions are
 * created over HTTP with the admin token from `POLAR_ADMIN_TOKEN` (see `docs/proxy.md`).
 *
 * @module
 */

import { Registry } from "prom-client";
import {
  ENGINE_PRIORITY_SETTINGS,
  EnginePriorityError,
  type EnginePrioritySetting,
} from "../../proxy/engine-priority";
import { ENGINE_NAMES, type EngineName } from "../../proxy/engines";
import { TokenModeConfigError } from "../../proxy/engines/sglang-token/mode";
import { PromProxyMetrics, registerProcessMetrics } from "../../proxy/metrics-prom";
import { ROUTER_POLICIES, type RouterPolicy } from "../../proxy/router";
import { startProxy } from "../../proxy/server";
import { TokenizerLoadError } from "../../tokenizer/chat-tokenizer";
import { parseRoutedExperts, type TokenModeFlags } from "../token-mode-flags";
import { UsageError } from "../usage-error";

/** Options of {@link runProxy}, as commander parses them. */
export interface ProxyCommandOptions extends TokenModeFlags {
  engine: string;
  engineUrl?: string;
  routerUrl?: string;
  /** The router's `--policy` (it does not report it): says what session affinity the user gets. */
  routerPolicy?: string;
  model: string;
  port: number;
  host: string;
  captureDir?: string;
  requestTimeoutMs?: number;
  /** Whether and how sessions' `engine_priority` is sent: auto | off | higher_first | lower_first. */
  enginePriority?: string;
  /** `--no-partial-rollouts` gives false (commander's default for the negated flag is true). */
  partialRollouts?: boolean;
  /** Longest retry of a model call while no engine replica is available (seconds; 0 = none). */
  engineRetrySeconds?: number;
}

const TOKEN_FLAGS = [
  ["modelFamily", "--model-family"],
  ["chatTemplate", "--chat-template"],
  ["toolCallParser", "--tool-call-parser"],
  ["reasoningParser", "--reasoning-parser"],
  ["contextLength", "--context-length"],
  ["delegateParsing", "--delegate-parsing"],
  ["onTemplateMismatch", "--on-template-mismatch"],
  ["routedExperts", "--routed-experts"],
] as const;

/** The token-mode flags, checked; throws {@link UsageError} naming the flag. */
function tokenModeFlags(opts: ProxyCommandOptions) {
  if (opts.engine !== "sglang") {
    for (const [key, flag] of TOKEN_FLAGS) {
      if (opts[key] !== undefined && opts[key] !== false)
        throw new UsageError(`${flag}: only applies to --engine sglang (token mode)`);
    }
    return {};
  }
  let contextLength: number | undefined;
  if (opts.contextLength !== undefined) {
    contextLength = Number(opts.contextLength);
    if (!Number.isInteger(contextLength) || contextLength < 2)
      throw new UsageError(`--context-length: must be an integer >= 2, got '${opts.contextLength}'`);
  }
  const mismatch = opts.onTemplateMismatch;
  if (mismatch !== undefined && mismatch !== "bridge" && mismatch !== "new_chain")
    throw new UsageError(`--on-template-mismatch: '${mismatch}' is not one of bridge, new_chain`);
  return {
    ...(opts.modelFamily ? { modelFamily: opts.modelFamily } : {}),
    ...(opts.chatTemplate ? { chatTemplate: opts.chatTemplate } : {}),
    ...(opts.toolCallParser ? { toolCallParser: opts.toolCallParser } : {}),
    ...(opts.reasoningParser ? { reasoningParser: opts.reasoningParser } : {}),
    ...(contextLength !== undefined ? { contextLength } : {}),
    ...(opts.delegateParsing ? { delegateParsing: true } : {}),
    ...(mismatch ? { onTemplateMismatch: mismatch as "bridge" | "new_chain" } : {}),
    ...(opts.routedExperts !== undefined ? { routedExperts: routedExpertsFlag(opts.routedExperts) } : {}),
  };
}

function routedExpertsFlag(value: string) {
  try {
    return parseRoutedExperts(value);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * Checks the flags and returns the proxy options; throws {@link UsageError} naming the flag.
 *
 * @example
 * ```ts
 * proxyOptionsFrom({ engine: "vllm", engineUrl: "http://127.0.0.1:8000", model: "Qwen/Qwen3-8B", port: 4000, host: "127.0.0.1" }, "tok");
 * ```
 */
export function proxyOptionsFrom(opts: ProxyCommandOptions, adminToken: string | undefined) {
  if (!ENGINE_NAMES.includes(opts.engine as EngineName)) {
    throw new UsageError(`--engine: '${opts.engine}' is not one of ${ENGINE_NAMES.join(", ")}`);
  }
  const urls = (opts.engineUrl ?? "")
    .split(",")
    .map((u) => u.trim())
    .filter(Boolean);
  if (urls.length === 0 && !opts.routerUrl)
    throw new UsageError("--engine-url: give at least one URL (or --router-url)");
  for (const u of [...urls, ...(opts.routerUrl ? [opts.routerUrl] : [])]) {
    let parsed: URL;
    try {
      parsed = new URL(u);
    } catch {
      throw new UsageError(`--engine-url: '${u}' is not a URL`);
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
      throw new UsageError(`--engine-url: '${u}' must be http(s)`);
  }
  if (!opts.model) throw new UsageError("--model: required (the model name the engine serves)");
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535)
    throw new UsageError("--port: must be 0-65535");
  if (!adminToken)
    throw new UsageError("POLAR_ADMIN_TOKEN: set it; it guards POST /sessions and /admin/inference/*");
  return {
    engine: opts.engine as EngineName,
    engineUrls: urls,
    ...(opts.routerUrl ? { routerUrl: opts.routerUrl } : {}),
    ...routerPolicyFlag(opts),
    modelServed: opts.model,
    port: opts.port,
    host: opts.host,
    adminToken,
    ...(opts.tokenizerPath ? { tokenizerPath: opts.tokenizerPath } : {}),
    ...tokenModeFlags(opts),
    ...(opts.captureDir ? { captureDir: opts.captureDir } : {}),
    ...(opts.requestTimeoutMs ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    ...enginePriorityFlag(opts.enginePriority),
    ...(opts.partialRollouts === false ? { partialRollouts: false } : {}),
    ...(opts.engineRetrySeconds === undefined ? {} : { engineRetryMs: opts.engineRetrySeconds * 1000 }),
  };
}

/**
 * `--engine-priority`, checked (shared with `polar serve_gateway`).
 *
 * @example
 * ```ts
 * enginePriorityFlag("lower_first"); // { enginePriority: "lower_first" }
 * enginePriorityFlag("sometimes"); // throws UsageError "--engine-priority: 'sometimes' is not one of …"
 * ```
 */
export function enginePriorityFlag(value: string | undefined): { enginePriority?: EnginePrioritySetting } {
  if (value === undefined) return {};
  if (!(ENGINE_PRIORITY_SETTINGS as readonly string[]).includes(value))
    throw new UsageError(
      `--engine-priority: '${value}' is not one of ${ENGINE_PRIORITY_SETTINGS.join(", ")}`,
    );
  return { enginePriority: value as EnginePrioritySetting };
}

/** `--router-policy`, checked against the router's policy names. */
function routerPolicyFlag(opts: ProxyCommandOptions): { routerPolicy?: RouterPolicy } {
  if (opts.routerPolicy === undefined) return {};
  if (!opts.routerUrl) throw new UsageError("--router-policy: only applies with --router-url");
  if (!(ROUTER_POLICIES as readonly string[]).includes(opts.routerPolicy))
    throw new UsageError(
      `--router-policy: '${opts.routerPolicy}' is not one of ${ROUTER_POLICIES.join(", ")}`,
    );
  return { routerPolicy: opts.routerPolicy as RouterPolicy };
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/**
 * Runs the proxy until SIGINT/SIGTERM.
 *
 * @example
 * ```ts
 * await runProxy({ engine: "sglang-openai", engineUrl: "http://127.0.0.1:30000", model: "Qwen/Qwen3-8B", port: 4000, host: "127.0.0.1" });
 * ```
 */
export async function runProxy(opts: ProxyCommandOptions): Promise<void> {
  const options = proxyOptionsFrom(opts, process.env.POLAR_ADMIN_TOKEN);
  // The same proxy families a gateway exports, with the process collectors, on GET /metrics.
  const registry = new Registry();
  registerProcessMetrics(registry);
  const metrics = new PromProxyMetrics();
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  try {
    proxy = await startProxy({
      ...options,
      metrics,
      metricsEndpoint: async () => ({ contentType: registry.contentType, body: await registry.metrics() }),
    });
  } catch (err) {
    // Start-up failures of token mode name an option or a file: say which flag that is.
    if (err instanceof TokenizerLoadError)
      throw new UsageError(
        `${err.source === "template" ? "--chat-template" : "--tokenizer-path"}: ${err.message}`,
      );
    if (err instanceof TokenModeConfigError) throw new UsageError(`--${kebab(err.option)}: ${err.message}`);
    if (err instanceof EnginePriorityError) throw new UsageError(`--engine-priority: ${err.message}`);
    throw err;
  }
  metrics.register(registry, () => proxy.status());
  console.log(`polar proxy (${opts.engine}, model ${opts.model}) listening at ${proxy.url}`);
  console.log(
    `create a session: curl -X POST -H "Authorization: Bearer $POLAR_ADMIN_TOKEN" ${proxy.url}/sessions`,
  );
  const stop = async () => {
    await proxy.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
