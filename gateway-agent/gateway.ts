/**
 * `startGateway`: wires the recording proxy, the control-plane connection and the session runner
 * of one GPU host.
 *
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type HelloMessage, type RuntimeSpec, WIRE_VERSION } from "../protocol";
import { startProxy } from "../proxy";
import type { ProxyOptions } from "../proxy/server";
import { DEFAULT_UPLOAD_POLICY, type UploadPolicy } from "./artifacts";
import { ControlConnection, type ReconnectPolicy } from "./connection";
import { ControlPlaneHttp, DEFAULT_REQUEST_TIMEOUTS, type RequestTimeouts } from "./control-http";
import { consoleLogger, type GatewayLogger, type GatewayRefusedError, messageOf } from "./errors";
import { DEFAULT_KEEP_FAILED_SESSIONS, FailedSessionKeeper } from "./failed-sessions";
import { SUPPORTED_HARNESSES } from "./harness";
import { HarnessAvailability } from "./harness/availability";
import { type GatewayHttpServer, GatewayMetrics, startGatewayHttp } from "./http-server";
import { ResultJournal } from "./journal";
import { registerBridgeMetrics } from "./metrics-bridge";
import {
  BUILTIN_RUNTIMES,
  bwrapAvailable,
  DEFAULT_RUNTIME_SETTINGS,
  detectLimits,
  type RuntimeSettings,
} from "./runtime";
import { type AdminControls, type RunnerStats, SessionRunner } from "./session-runner";

/** Version this agent reports in `hello`. */
export const AGENT_VERSION = "0.1.0";

/** Options of {@link startGateway}. */
export interface GatewayOptions {
  /** Control plane base URL, `http(s)://…`; the socket goes to `<url>/v1/gateways/connect`. */
  controlPlaneUrl: string;
  /** This host's id (an `Identifier`). */
  nodeId: string;
  /** Gateway bearer token (`POLAR_GATEWAY_TOKEN`). Never passed to harnesses. */
  token: string;
  /** Queue to pull from; default `default`. */
  queue?: string;
  /**
   * Inference engine kind, a proxy engine name: `sglang` (token mode: the proxy renders the
   * template and calls `/generate` with ids, see `docs/token-mode.md`), `sglang-openai` or `vllm`.
   */
  engine: Parameters<typeof startProxy>[0]["engine"];
  /** Tokenizer + chat template folder (token mode; default the bundled Qwen3 files). */
  tokenizerPath?: string;
  /** Token mode: tool-call parser (`qwen3`, `qwen3_coder`, …); default `qwen3`. */
  toolCallParser?: string;
  /** Token mode: reasoning parser (`qwen3`, `qwen3-thinking`, `deepseek-r1`, `none`); default `qwen3`. */
  reasoningParser?: string;
  /** Token mode: the model's context window; default 40 960. */
  contextLength?: number;
  /** Token mode: `bridge` (default) or `new_chain` when the template rewrites history. */
  onTemplateMismatch?: ProxyOptions["onTemplateMismatch"];
  /** Token mode: parse with SGLang's `/separate_reasoning` + `/parse_function_call`. */
  delegateParsing?: boolean;
  /** Engine base URL, e.g. `http://127.0.0.1:30000`. */
  engineUrl: string;
  /** More engine replicas (data-parallel servers), when the proxy supports several. */
  engineUrls?: string[];
  /** Model name the engine serves (forced on every call; the default `OPENAI_MODEL` of harnesses). */
  model: string;
  /** Sessions initialising at once; default 2. */
  maxInit?: number;
  /** Harnesses running at once; default 2. */
  maxRun?: number;
  /** Sessions in post-run (build, evaluate, tear down) at once; default 2. */
  maxPostrun?: number;
  /**
   * Folder for session workspaces (`sessions/`) and the result journal (`journal/`); default a
   * fresh temporary folder — give a fixed one in production so results survive a restart.
   */
  workRoot?: string;
  /** Backend settings (bwrap, docker/podman CLI flags, apptainer). */
  runtimeSettings?: Partial<RuntimeSettings>;
  /** Runtime for tasks without one (topology `default_runtime`). */
  defaultRuntime?: RuntimeSpec | null;
  /** Operator HTTP server (`/health`, `/metrics`); omitted = none. */
  http?: { host: string; port: number };
  /** Artifact upload retries (backoff and concurrency; they go on until the upload succeeds). */
  uploadPolicy?: UploadPolicy;
  /** Deadline of each HTTP request to the control plane, by size; default 15 s + 256 KiB/s. */
  requestTimeouts?: RequestTimeouts;
  /**
   * Bytes of results the journal may hold before the gateway takes no new sessions (default
   * `DEFAULT_JOURNAL_MAX_BYTES`, 1 GiB); nothing journaled is ever dropped.
   */
  journalMaxBytes?: number;
  /** Keep each session's folder after teardown (debugging). */
  keepWorkspaces?: boolean;
  /**
   * Failed sessions whose logs are kept under `work_root/failed/` (newest first); default
   * {@link DEFAULT_KEEP_FAILED_SESSIONS}, 0 = none.
   */
  keepFailedSessions?: number;
  /** Engine request timeout of the proxy (ms); default 900 s. */
  requestTimeoutMs?: number;
  /** Reconnect backoff; default 0.5 s doubling to 10 s, jittered. */
  reconnect?: ReconnectPolicy;
  /** Longest a dial of the control plane may take until the socket is open (ms); default 10 s. */
  connectTimeoutMs?: number;
  logger?: GatewayLogger;
}

/** The proxy's token-mode options among the gateway's (unset ones are left to the proxy's defaults). */
function tokenModeOptions(opts: GatewayOptions): Partial<ProxyOptions> {
  const keys = [
    "tokenizerPath",
    "toolCallParser",
    "reasoningParser",
    "contextLength",
    "onTemplateMismatch",
    "delegateParsing",
  ] as const;
  return Object.fromEntries(keys.filter((k) => opts[k] !== undefined).map((k) => [k, opts[k]]));
}

/** Snapshot for monitoring and tests. */
export interface GatewayStats extends RunnerStats {
  connected: boolean;
  connects: number;
}

/** The proxy as the gateway uses it (admin controls are optional: feature-detected). */
type GatewayProxy = Awaited<ReturnType<typeof startProxy>> & AdminControls;

/** A running gateway. */
export interface Gateway {
  nodeId: string;
  /** Base URL of this gateway's recording proxy. */
  proxyUrl: string;
  /** Base URL of the operator server, when started. */
  httpUrl: string | null;
  workRoot: string;
  /** Interrupts running sessions (reported as infra failures), closes the socket and the proxy. */
  stop(): Promise<void>;
  stats(): GatewayStats;
  /**
   * Settles when the control plane refused this gateway for good (see {@link GatewayRefusedError});
   * the gateway has then stopped itself. Pending for as long as the gateway may reconnect.
   */
  refused: Promise<GatewayRefusedError>;
}

/**
 * Starts a gateway: its proxy on `127.0.0.1:<free port>`, then the outbound connection.
 *
 * @example
 * ```ts
 * const gateway = await startGateway({
 *   controlPlaneUrl: "http://127.0.0.1:8787",
 *   nodeId: "gpu-0",
 *   token: process.env.POLAR_GATEWAY_TOKEN!,
 *   engine: "sglang-openai",
 *   engineUrl: "http://127.0.0.1:30000",
 *   model: "Qwen/Qwen3-8B",
 * });
 * process.once("SIGTERM", () => gateway.stop());
 * ```
 */
export async function startGateway(opts: GatewayOptions): Promise<Gateway> {
  const logger = opts.logger ?? consoleLogger;
  // Detected once: how the local runtime enforces runtime.cpus/memory_mb on this host.
  const limits = detectLimits();
  const limitFields = { mechanism: limits.mechanism, detail: limits.detail };
  if (limits.mechanism === "rlimit") logger.warn("local runtime resource limits", limitFields);
  else logger.info("local runtime resource limits", limitFields);
  const capacity = {
    max_init: opts.maxInit ?? 2,
    max_run: opts.maxRun ?? 2,
    max_postrun: opts.maxPostrun ?? 2,
  };
  for (const [name, value] of Object.entries(capacity)) {
    if (!Number.isInteger(value) || value < 1)
      throw new RangeError(`${name}: must be an integer >= 1, got ${value}`);
  }
  const workRoot = path.resolve(opts.workRoot ?? (await mkdtemp(path.join(tmpdir(), "polar-gateway-"))));
  // Session folders of a previous run belong to sessions that died with it (their leases are not
  // in the journal, so the control plane requeues them): start clean.
  await rm(path.join(workRoot, "sessions"), { recursive: true, force: true });
  const runtimeSettings: RuntimeSettings = {
    local: { ...DEFAULT_RUNTIME_SETTINGS.local, ...opts.runtimeSettings?.local },
    docker: { ...DEFAULT_RUNTIME_SETTINGS.docker, ...opts.runtimeSettings?.docker },
    apptainer: { ...DEFAULT_RUNTIME_SETTINGS.apptainer, ...opts.runtimeSettings?.apptainer },
  };
  const keepFailed = opts.keepFailedSessions ?? DEFAULT_KEEP_FAILED_SESSIONS;
  if (!Number.isInteger(keepFailed) || keepFailed < 0)
    throw new RangeError(`keepFailedSessions: must be an integer >= 0, got ${keepFailed}`);
  const failedSessions = new FailedSessionKeeper(workRoot, keepFailed, logger);
  await failedSessions.prune();
  // Checked once here for the log and /health; each session re-checks its own preset.
  const local = runtimeSettings.local;
  const harnesses = new HarnessAvailability({
    sandboxed: local.sandbox !== "never" && bwrapAvailable(local.bwrapPath),
    workRoot,
  });
  const harnessReport = harnesses.report();
  const unavailable = Object.entries(harnessReport).filter(([, c]) => !c.available);
  const harnessFields = {
    available: Object.entries(harnessReport)
      .filter(([, c]) => c.available)
      .map(([name, c]) => `${name} (${c.via === "installed" ? c.cli : "install step"})`),
    unavailable: unavailable.map(([name]) => name),
  };
  if (unavailable.length) {
    logger.warn(
      "harness presets not available to local sessions (they fail at once as configuration errors)",
      {
        ...harnessFields,
        why: Object.fromEntries(unavailable.map(([name, c]) => [name, `${c.reason}. Fix: ${c.fix}`])),
      },
    );
  } else logger.info("harness presets", harnessFields);
  const proxy = (await startProxy({
    engine: opts.engine,
    engineUrl: opts.engineUrl,
    ...(opts.engineUrls?.length ? { engineUrls: opts.engineUrls } : {}),
    modelServed: opts.model,
    requestTimeoutMs: opts.requestTimeoutMs,
    ...tokenModeOptions(opts),
    logger,
  } as Parameters<typeof startProxy>[0])) as GatewayProxy;
  let connection: ControlConnection | null = null;
  let metrics: GatewayMetrics | null = null;
  const controlHttp = new ControlPlaneHttp(
    opts.controlPlaneUrl,
    opts.token,
    opts.requestTimeouts ?? DEFAULT_REQUEST_TIMEOUTS,
  );
  const runner = new SessionRunner({
    nodeId: opts.nodeId,
    capacity,
    workRoot,
    keepWorkspaces: opts.keepWorkspaces ?? false,
    model: opts.model,
    engine: opts.engine,
    proxy,
    runtimeSettings,
    defaultRuntime: opts.defaultRuntime ?? null,
    journal: new ResultJournal(path.join(workRoot, "journal"), logger),
    upload: { http: controlHttp, policy: opts.uploadPolicy ?? DEFAULT_UPLOAD_POLICY, logger },
    ...(opts.journalMaxBytes !== undefined ? { journalMaxBytes: opts.journalMaxBytes } : {}),
    logger,
    harnesses,
    failedSessions,
    send: (message) => connection?.send(message) ?? false,
    onFinished: (result, runStartMs) => metrics?.observe(result, runStartMs),
  });
  await runner.recover();
  const hello = (): HelloMessage => ({
    v: WIRE_VERSION,
    type: "hello",
    node_id: opts.nodeId,
    agent_version: AGENT_VERSION,
    capacity,
    capabilities: {
      runtimes: [...BUILTIN_RUNTIMES],
      harnesses: [...SUPPORTED_HARNESSES],
      engines: [opts.engine],
    },
    credit: runner.resetCreditForHello(),
    leases: runner.heldLeases(),
  });
  let stopGateway: (() => Promise<void>) | null = null;
  let refusal: GatewayRefusedError | null = null;
  // Nothing this gateway runs can be reported any more: stop (results stay journaled).
  const stopRefused = () =>
    void stopGateway?.().catch((e: unknown) =>
      logger.error("stop after refusal failed", { error: messageOf(e) }),
    );
  let onRefused: (err: GatewayRefusedError) => void = () => {};
  const refused = new Promise<GatewayRefusedError>((resolve) => {
    onRefused = (err) => {
      refusal = err;
      resolve(err);
      stopRefused();
    };
  });
  connection = new ControlConnection({
    controlPlaneUrl: opts.controlPlaneUrl,
    queue: opts.queue ?? "default",
    nodeId: opts.nodeId,
    token: opts.token,
    logger,
    reconnect: opts.reconnect,
    ...(opts.connectTimeoutMs !== undefined ? { connectTimeoutMs: opts.connectTimeoutMs } : {}),
    hello,
    onWelcome: (welcome) => {
      // Before any assignment of this connection is handled: a paused queue pauses this gateway.
      runner.applyWelcomeFence(welcome.fence);
      runner.linkUp();
    },
    onDown: () => {
      // Whatever killed the socket may have killed the pooled upload connections too: never
      // write into one of them again.
      controlHttp.resetConnections();
      runner.linkDown();
    },
    onMessage: (message) => runner.handle(message),
    onRefused: (err) => onRefused(err),
  });
  connection.start();
  let stopping: Promise<void> | null = null;
  const conn = connection;
  const stats = (): GatewayStats => ({
    ...runner.stats(),
    connected: conn.connected,
    connects: conn.connects,
  });
  metrics = new GatewayMetrics(opts.nodeId, stats, () => harnesses.report());
  registerBridgeMetrics(metrics.registry, () => proxy.status().bridge);
  let ops: GatewayHttpServer | null = null;
  if (opts.http) {
    ops = await startGatewayHttp({
      ...opts.http,
      metrics,
      health: () => {
        const s = stats();
        return {
          status: "ok",
          node_id: opts.nodeId,
          connected: s.connected,
          draining: s.draining,
          inference: (({ paused, mode, inflight, waiting, policy_version }) => ({
            paused,
            mode,
            inflight,
            waiting,
            policy_version,
          }))(proxy.status()),
          ...s.metrics,
          unacked_results: s.unackedResults,
          uploading_results: s.uploadingResults,
          journal_bytes: s.journalBytes,
          local_limits: limitFields,
          harnesses: harnesses.report(),
          failed_sessions: { dir: failedSessions.dir, keep: failedSessions.keep },
        };
      },
    });
  }
  stopGateway = () => {
    stopping ??= (async () => {
      await runner.shutdown();
      await conn.close();
      controlHttp.close();
      await ops?.close();
      await proxy.close();
    })();
    return stopping;
  };
  if (refusal) stopRefused(); // refused while the operator server was starting
  return {
    nodeId: opts.nodeId,
    proxyUrl: proxy.url,
    httpUrl: ops?.url ?? null,
    workRoot,
    stop: () => (stopGateway as () => Promise<void>)(),
    stats,
    refused,
  };
}
