/**
 * The recording proxy: an HTTP server between one host's harnesses and its inference engine
 * replicas. It speaks OpenAI Chat, OpenAI Responses, Anthropic Messages and Google Gemini; the
 * harness's API key is its session key; every successful call becomes a {@link CompletionRecord}
 * with the exact prompt ids, sampled ids and logprobs the engine saw.
 *
 * @module
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { CompletionRecord, FenceMode, JsonObject, Logger } from "../protocol";
import type { BridgeFlag, Verdict, VerdictRow } from "../tokenizer/bridge";
import { handleAdmin } from "./admin";
import type { InferenceDeps } from "./call";
import {
  CaptureStore,
  MAX_RECORDS_PER_SESSION,
  MAX_SESSION_CAPTURE_BYTES,
  type SessionOptions,
  type SessionView,
} from "./capture";
import { type EnginePrioritySetting, type PriorityOrder, resolveEnginePriority } from "./engine-priority";
import { type EngineAdapter, type EngineName, engineAdapter, isTokenEngine } from "./engines";
import { pickTokenModeOptions, TokenMode, type TokenModeOptions } from "./engines/sglang-token/mode";
import { VllmEnginePause } from "./engines/vllm-control";
import {
  failureCode,
  isAbortError,
  openAiError,
  type PolicyVersionGap,
  ProxyHttpError,
  sendFamilyError,
} from "./errors";
import { detectFamily, openAiChat, requestKey } from "./families";
import type { Family } from "./families/types";
import { type FenceStatus, InferenceFence, type PauseResult } from "./fence";
import { serveCall } from "./inference";
import { NO_PROXY_METRICS, type ProxyMetricsSink } from "./metrics";
import { ReplicaSet, type ReplicaStatus } from "./replicas";
import { jsonObjectBody, MAX_REQUEST_BODY_BYTES, parseJsonBody, readBody, sendJson } from "./request-io";
import type { RouterPolicy } from "./router";
import { TokenCounter } from "./token-count";

export { MAX_REQUEST_BODY_BYTES, readBody, sendJson } from "./request-io";

/** Default engine request timeout: 900 s, long agent turns on big models included. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 900_000;
/**
 * How long a harness's idle keep-alive connection stays open (ms), advertised as
 * `Keep-Alive: timeout=300`. Node's default (5 s) is shorter than the gap between two turns of an
 * agent that runs a tool: the proxy closed the idle socket while a harness blocked in a tool call
 * (e.g. a synchronous `node --test`) could not see the FIN, and its next request on that socket
 * failed with "other side closed" (the session ended as an agent error). Harnesses start a new
 * connection by themselves once the advertised time has passed.
 */
export const HARNESS_KEEP_ALIVE_MS = 300_000;

/**
 * Options of {@link startProxy}. The token-mode options (`TokenModeOptions`) apply to engine `sglang`; `tokenizerPath` also gives
 * the chat engines exact `count_tokens` answers (else an estimate of 4 characters per token).
 */
export interface ProxyOptions extends TokenModeOptions {
  /** Interface to listen on; default `127.0.0.1` (harnesses run on the same host). */
  host?: string;
  /** Port; default 0 (any free port). */
  port?: number;
  /** Engine kind. */
  engine: EngineName;
  /** Engine base URL, e.g. `http://127.0.0.1:30000` (one replica). */
  engineUrl?: string;
  /** Several engine replicas (added to `engineUrl` when both are given). */
  engineUrls?: string[];
  /** SGLang router to discover workers from (`GET /workers`). */
  routerUrl?: string;
  /**
   * The router's `--policy`, as the operator knows it (the router does not say): decides whether
   * `X-SMG-Routing-Key` keeps affinity when the proxy has to call the router itself.
   */
  routerPolicy?: RouterPolicy;
  /** Replica health-check interval (ms); 0 disables it. */
  healthIntervalMs?: number;
  /** How long a replica that answered 502/503/504 is skipped (ms); default 2 s. */
  unavailableCooldownMs?: number;
  /** Model name the engine serves; forced on every request. */
  modelServed: string;
  /** Engine request timeout (ms); default {@link DEFAULT_REQUEST_TIMEOUT_MS}. A timeout answers 504. */
  requestTimeoutMs?: number;
  /**
   * Longest a call is held because every replica is behind its session's `min_policy_version`
   * (ms; time at a paused fence not counted); then it fails with 400 `policy_version_unavailable`
   * and the session ends. Default `DEFAULT_POLICY_VERSION_WAIT_MS` (120 s); 0 = fail at once.
   */
  policyVersionWaitMs?: number;
  /**
   * Whether and how sessions' `engine_priority` goes to the engine: `auto` (default) reads SGLang's
   * `/server_info` at start and sends nothing to vLLM; `off`; or the engine's order, `higher_first`
   * (SGLang's default) or `lower_first` (vLLM `--scheduling-policy priority`). See `engine-priority.ts`.
   */
  enginePriority?: EnginePrioritySetting;
  /**
   * Token mode: a turn aborted by a pause in `abort` mode keeps what it sampled and is continued
   * after resume (partial rollouts); false: issued again from its start. Default true.
   */
  partialRollouts?: boolean;
  /**
   * How long a call keeps being retried while every replica is unavailable before the harness
   * gets the failure (ms); default `DEFAULT_ENGINE_RETRY_MS` (30 s). A failure that does reach the
   * harness taints the session (`engineFailure`).
   */
  engineRetryMs?: number;
  /** Cap on recorded completions per session; default {@link MAX_RECORDS_PER_SESSION}. */
  maxRecordsPerSession?: number;
  /** Cap on recorded bytes per session; default {@link MAX_SESSION_CAPTURE_BYTES}. */
  maxSessionBytes?: number;
  /** Persist each session's records under `<captureDir>/<session id>/completions.jsonl`. */
  captureDir?: string;
  /** Receives what the proxy measures (requests, tokens, engine latency, errors); default: dropped. */
  metrics?: ProxyMetricsSink;
  /**
   * Serves `GET /metrics` with what this returns (the standalone proxy's own registry); omitted =
   * no such route (the gateway serves the proxy's families on its operator port instead).
   */
  metricsEndpoint?: () => Promise<{ contentType: string; body: string }>;
  /** Enables the standalone session API and `/admin/inference/*` for this bearer token. */
  adminToken?: string;
  logger?: Logger;
}

/** Everything `status()` reports. */
export interface ProxyStatus extends FenceStatus {
  replicas: ReplicaStatus[];
  sessions: number;
  /** Token mode: turn verdict and flag counts per (harness, model) since start; empty for chat engines. */
  bridge: VerdictRow[];
}

/** A running proxy. */
export interface RecordingProxy {
  /** Base URL, e.g. `http://127.0.0.1:PORT` (OpenAI harnesses use `<url>/v1`). */
  url: string;
  /** Opens a session and returns its secret key (`sk-polar-<32 hex>`), the harness's API key. */
  openSession(sessionId: string, meta?: JsonObject, opts?: SessionOptions): { key: string };
  /** The session's records, in completion order. */
  completions(sessionId: string): CompletionRecord[];
  /**
   * Why the proxy ended the session, if it did: a call found no replica at the session's
   * `min_policy_version` within `policyVersionWaitMs`. Null otherwise. Read it before `closeSession`.
   */
  policyVersionGap(sessionId: string): PolicyVersionGap | null;
  /**
   * The first engine failure (unreachable, timed out, 5xx, a broken contract) that reached the
   * session's harness after the proxy's retries, or null. Read it before `closeSession`.
   */
  engineFailure(sessionId: string): string | null;
  /** Resolves once the session's records are persisted. */
  flush(sessionId: string): Promise<void>;
  /** Forgets the session; its key stops working. Resolves once its records are persisted. */
  closeSession(sessionId: string): Promise<void>;
  /**
   * New calls wait; in-flight calls drain (`drain`, the default) or are aborted at the engine and
   * issued again after resume (`abort`); resolves once none is in flight or after `timeoutMs`.
   */
  pause(opts: { timeoutMs: number; mode?: FenceMode }): Promise<PauseResult>;
  /** Releases waiting calls. */
  resume(): void;
  status(): ProxyStatus;
  /**
   * Token mode: the session's turn verdict counts (`extended`, `template_mismatch`, `new_chain`,
   * `compacted`, `history_rewritten`), for the session result's metadata; null for chat engines or
   * a session that made no call. Read it before `closeSession`.
   */
  bridgeVerdicts(sessionId: string): Record<Verdict, number> | null;
  /**
   * Token mode: how many of the session's turns carry each bridge flag (`reasoning_dropped`: the
   * harness sent a reply back without the reasoning the proxy returned); null as for
   * `bridgeVerdicts`. Read it before `closeSession`.
   */
  bridgeFlags(sessionId: string): Record<BridgeFlag, number> | null;
  /** Token mode only: the text of one token id, decoded alone (`tokenizer.decode([id])`). */
  decodeToken?(id: number): string;
  /** Policy version stamped (`metadata.policy_version`) on records of calls admitted from now on. */
  setPolicyVersion(version: string | null): void;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

const consoleLogger: Logger = {
  info: (m, f) => console.info(`[proxy] ${m}`, f ?? ""),
  warn: (m, f) => console.warn(`[proxy] ${m}`, f ?? ""),
  error: (m, f) => console.error(`[proxy] ${m}`, f ?? ""),
};

/** The proxy's state and HTTP handler. */
export class ProxyServer {
  readonly store: CaptureStore;
  readonly fence = new InferenceFence();
  readonly replicas: ReplicaSet;
  /** Chat engine adapter; null in token mode. */
  readonly engine: EngineAdapter | null;
  private readonly deps: InferenceDeps;
  /** Answers the token count routes. */
  private readonly tokens: TokenCounter;

  constructor(
    readonly opts: ProxyOptions,
    readonly log: Logger,
    /** Token mode state; given exactly when `opts.engine` is `sglang`. */
    readonly tokenMode: TokenMode | null = null,
  ) {
    this.store = new CaptureStore(
      opts.maxRecordsPerSession ?? MAX_RECORDS_PER_SESSION,
      opts.maxSessionBytes ?? MAX_SESSION_CAPTURE_BYTES,
      (sessionId, error) =>
        log.error("could not persist a completion record", { sessionId, error: error.message }),
    );
    if (isTokenEngine(opts.engine) !== (tokenMode !== null))
      throw new Error("engine: token mode state is required exactly for engine 'sglang'");
    const engine = tokenMode ? null : engineAdapter(opts.engine);
    this.engine = engine;
    this.tokens = new TokenCounter(tokenMode, opts.tokenizerPath);
    const urls = [...(opts.engineUrl ? [opts.engineUrl] : []), ...(opts.engineUrls ?? [])];
    this.replicas = new ReplicaSet(urls, {
      ...(opts.routerUrl ? { routerUrl: opts.routerUrl } : {}),
      ...(opts.routerPolicy ? { routerPolicy: opts.routerPolicy } : {}),
      ...(opts.healthIntervalMs !== undefined ? { healthIntervalMs: opts.healthIntervalMs } : {}),
      ...(opts.unavailableCooldownMs !== undefined
        ? { unavailableCooldownMs: opts.unavailableCooldownMs }
        : {}),
      // SGLang reports its weight version at /model_info; vLLM only at its dev-mode /weight_info.
      modelInfo: true,
      versionPath: opts.engine === "vllm" ? "/weight_info" : "/model_info",
      onChange: (m, f) => log.warn(m, f),
      // What calling the router itself costs (affinity, aborts) is said once, at start.
      onInfo: (m, f) => log.warn(m, f),
    });
    // Weights may have changed during a pause: re-read each replica's version before using it.
    this.fence.onResume(() => this.replicas.markVersionsStale());
    if (opts.engine === "vllm") {
      // vLLM's engine-side pause, where the server has it (see engines/vllm-control.ts).
      const enginePause = new VllmEnginePause(log);
      this.fence.onPause((mode) =>
        mode === "abort" ? enginePause.pause(this.replicas.status().map((r) => r.url)) : undefined,
      );
      this.fence.onResume(() => void enginePause.resume());
    }
    this.deps = {
      ...(tokenMode ? { engine: null, tokenMode } : { engine: engine as EngineAdapter, tokenMode: null }),
      store: this.store,
      fence: this.fence,
      replicas: this.replicas,
      modelServed: opts.modelServed,
      timeoutMs: opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      ...(opts.policyVersionWaitMs === undefined ? {} : { policyVersionWaitMs: opts.policyVersionWaitMs }),
      partialRollouts: opts.partialRollouts ?? true,
      ...(opts.engineRetryMs === undefined ? {} : { engineRetryMs: opts.engineRetryMs }),
      metrics: opts.metrics ?? NO_PROXY_METRICS,
      logger: log,
    };
  }

  /** Sets how sessions' priorities are sent, once decided at start ({@link resolveEnginePriority}). */
  usePriorityOrder(order: PriorityOrder | null): void {
    this.deps.priorityOrder = order;
  }

  status(): ProxyStatus {
    return {
      ...this.fence.status(),
      replicas: this.replicas.status(),
      sessions: this.store.size,
      bridge: this.tokenMode?.snapshot() ?? [],
    };
  }

  /** Entry point of every request; nothing thrown here can take the server down. */
  handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    let family: Family = openAiChat;
    let inference = false;
    const metrics = this.deps.metrics;
    // Counted once the answer is over, whichever path ended it (reply, error, hang-up).
    res.once("close", () => {
      if (inference) metrics.request({ api: family.api, status: res.headersSent ? res.statusCode : 499 });
    });
    this.route(req, res, (f) => {
      family = f;
      inference = true;
    }).catch((err: unknown) => {
      metrics.error(failureCode(err));
      // The harness hung up mid-call: there is nobody left to answer.
      if (isAbortError(err)) {
        res.destroy();
        return;
      }
      const e = err instanceof ProxyHttpError ? null : err;
      if (e && !(e instanceof Error && e.name === "EngineStatusError")) {
        this.log.warn("request failed", { url: req.url, error: e instanceof Error ? e.message : String(e) });
      }
      try {
        sendFamilyError(res, family, err);
      } catch {
        res.destroy();
      }
    });
  };

  private async route(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    setFamily: (f: Family) => void,
  ): Promise<void> {
    const url = new URL(req.url ?? "/", "http://proxy");
    const path = url.pathname.replace(/\/+$/, "");
    if (req.method === "GET" && (await this.serveOpenGet(res, path))) return;
    if (this.opts.adminToken && (path.startsWith("/sessions") || path.startsWith("/admin/"))) {
      await handleAdmin(this, req, res, path, url.searchParams);
      return;
    }
    if (req.method !== "POST") {
      sendJson(
        res,
        404,
        openAiError(`no route for ${req.method} ${path || "/"}`, "invalid_request_error", "not_found"),
      );
      return;
    }
    await this.serveHarness(req, res, url, path, setFamily);
  }

  /** The GET routes that need no key: health, metrics (when served), the model list. */
  private async serveOpenGet(res: http.ServerResponse, path: string): Promise<boolean> {
    if (path === "/health") {
      sendJson(res, 200, { status: "ok", sessions: this.store.size, paused: this.fence.status().paused });
      return true;
    }
    if (path === "/metrics" && this.opts.metricsEndpoint) {
      const { contentType, body } = await this.opts.metricsEndpoint();
      res.writeHead(200, { "content-type": contentType }).end(body);
      return true;
    }
    if (path === "/v1/models") {
      sendJson(res, 200, {
        object: "list",
        data: [{ id: this.opts.modelServed, object: "model", created: 0, owned_by: "polar" }],
      });
      return true;
    }
    return false;
  }

  /** A harness's POST: its session by key, then a token count or a call in its family. */
  private async serveHarness(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    url: URL,
    path: string,
    setFamily: (f: Family) => void,
  ): Promise<void> {
    // Family by path and headers first, so even a body that is not JSON gets a native error.
    setFamily(detectFamily(path, req.headers, null));
    const body = parseJsonBody(await readBody(req, MAX_REQUEST_BODY_BYTES));
    const family = detectFamily(path, req.headers, body);
    setFamily(family);
    const session = this.sessionOf(requestKey(req.headers, url.searchParams));
    if (await this.tokens.serve(res, path, body)) return;
    const original = jsonObjectBody(body);
    const parsed = family.parse(original, { path, query: url.searchParams, headers: req.headers });
    await serveCall(this.deps, { family, session, original, parsed, path, res });
  }

  /** The open session a key belongs to; refused, not captured: an unknown key is a misconfigured harness. */
  private sessionOf(key: string | null): SessionView {
    const session = key ? this.store.resolveKey(key) : null;
    if (session) return session;
    throw new ProxyHttpError(
      401,
      "invalid_request_error",
      "invalid_api_key",
      key
        ? "Incorrect API key provided: not a session key of this proxy"
        : "Missing API key: send the session key as Authorization: Bearer, x-api-key, x-goog-api-key or ?key=",
    );
  }
}

/**
 * Starts the proxy on `host:port` (default `127.0.0.1:0`).
 *
 * @example
 * ```ts
 * const proxy = await startProxy({ engine: "sglang", engineUrl: "http://127.0.0.1:30000", modelServed: "Qwen/Qwen3-8B" });
 * const { key } = proxy.openSession("sess-1", { task_id: "t1" });
 * // harness: OPENAI_BASE_URL=`${proxy.url}/v1` OPENAI_API_KEY=key (or ANTHROPIC_BASE_URL=proxy.url, …)
 * const records = proxy.completions("sess-1");
 * await proxy.closeSession("sess-1");
 * await proxy.close();
 * ```
 */
export async function startProxy(opts: ProxyOptions): Promise<RecordingProxy> {
  const log = opts.logger ?? consoleLogger;
  const tokenMode = isTokenEngine(opts.engine)
    ? await TokenMode.create(pickTokenModeOptions(opts), opts.modelServed, {
        urls: [...(opts.engineUrl ? [opts.engineUrl] : []), ...(opts.engineUrls ?? [])],
        logger: log,
      })
    : null;
  const server = new ProxyServer(opts, log, tokenMode);
  await server.replicas.start();
  // Asked of the replicas as discovered (a router's workers too), before any call is served.
  const priority = await resolveEnginePriority({
    engine: opts.engine,
    setting: opts.enginePriority ?? "auto",
    urls: server.replicas.status().map((r) => r.url),
    logger: log,
  }).catch((err: unknown) => {
    server.replicas.stop();
    throw err;
  });
  server.usePriorityOrder(priority.order);
  log.info("engine replicas", {
    replicas: server.replicas.status().map((r) => ({
      url: r.url,
      source: r.source,
      ...(r.dp_ranks ? { dp_ranks: r.dp_ranks } : {}),
      ...(r.affinity ? { affinity: r.affinity } : {}),
    })),
  });
  const httpServer = http.createServer(server.handle);
  // Generations can take minutes; the engine timeout is the one that counts, not Node's defaults.
  httpServer.requestTimeout = 0;
  httpServer.headersTimeout = 60_000;
  httpServer.keepAliveTimeout = HARNESS_KEEP_ALIVE_MS;
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(opts.port ?? 0, host, () => {
      httpServer.off("error", reject);
      resolve();
    });
  });
  const { port } = httpServer.address() as AddressInfo;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const sessionDir = (id: string) =>
    opts.captureDir ? `${opts.captureDir.replace(/\/+$/, "")}/${id}` : undefined;
  return {
    url: `http://${urlHost}:${port}`,
    openSession: (sessionId, meta, sessionOpts) => {
      const dir = sessionOpts?.dir ?? sessionDir(sessionId);
      return server.store.open(sessionId, meta ?? {}, { ...sessionOpts, ...(dir ? { dir } : {}) });
    },
    completions: (sessionId) => server.store.records(sessionId),
    policyVersionGap: (sessionId) => server.store.versionGap(sessionId),
    engineFailure: (sessionId) => server.store.engineFailure(sessionId),
    flush: (sessionId) => server.store.flush(sessionId),
    closeSession: (sessionId) => {
      server.replicas.forget(sessionId);
      tokenMode?.forget(sessionId);
      return server.store.close(sessionId);
    },
    pause: (o) => server.fence.pause(o),
    resume: () => server.fence.resume(),
    status: () => server.status(),
    bridgeVerdicts: (sessionId) => tokenMode?.verdicts(sessionId) ?? null,
    bridgeFlags: (sessionId) => tokenMode?.flags(sessionId) ?? null,
    // One id at a time: the text of each id as the engine's vocabulary has it, never re-encoded.
    ...(tokenMode ? { decodeToken: (id: number) => tokenMode.tokenizer.decode([id]) } : {}),
    setPolicyVersion: (v) => server.fence.setPolicyVersion(v),
    close: () =>
      new Promise<void>((resolve) => {
        server.replicas.stop();
        server.fence.resume();
        httpServer.close(() => resolve());
        httpServer.closeAllConnections();
      }),
  };
}
