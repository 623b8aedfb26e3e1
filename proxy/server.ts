/**
 * The recording proxy: an OpenAI-compatible HTTP server between one host's harnesses and the
 * inference engine. The harness's API key is its session key; every successful call becomes a
 * {@link CompletionRecord} with the exact prompt ids, sampled ids and logprobs the engine saw.
 *
 * @module
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import type { CompletionRecord, JsonObject } from "../protocol";
import { CaptureStore, MAX_RECORDS_PER_SESSION, newCompletionId, type SessionView } from "./capture";
import { type EngineAdapter, type EngineName, engineAdapter } from "./engines";
import { validateChatRequest } from "./engines/sglang-openai";
import {
  EngineContractError,
  EngineStatusError,
  openAiError,
  ProxyHttpError,
  toHttpErrorResponse,
} from "./errors";
import { completionToSseEvents, toClientCompletion } from "./openai-chat";
import { postJson } from "./upstream";

/** Largest request body a harness may send (bytes); above it the proxy answers 413. */
export const MAX_REQUEST_BODY_BYTES = 32 * 1024 * 1024;
/** Default engine request timeout: 900 s, long agent turns on big models included. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 900_000;

/** Where the proxy writes its own diagnostics. */
export interface ProxyLogger {
  info(message: string, fields?: object): void;
  warn(message: string, fields?: object): void;
  error(message: string, fields?: object): void;
}

/** Options of {@link startProxy}. */
export interface ProxyOptions {
  /** Interface to listen on; default `127.0.0.1` (harnesses run on the same host). */
  host?: string;
  /** Port; default 0 (any free port). */
  port?: number;
  /** Engine kind. */
  engine: EngineName;
  /** Engine base URL, e.g. `http://127.0.0.1:30000`. */
  engineUrl: string;
  /** Model name the engine serves; forced on every request. */
  modelServed: string;
  /** Engine request timeout (ms); default {@link DEFAULT_REQUEST_TIMEOUT_MS}. A timeout answers 504. */
  requestTimeoutMs?: number;
  /** Cap on recorded completions per session; default {@link MAX_RECORDS_PER_SESSION}. */
  maxRecordsPerSession?: number;
  logger?: ProxyLogger;
}

/** A running proxy. */
export interface RecordingProxy {
  /** Base URL, e.g. `http://127.0.0.1:PORT` (harnesses use `<url>/v1`). */
  url: string;
  /** Opens a session and returns its secret key (`sk-polar-<32 hex>`), used as `OPENAI_API_KEY`. */
  openSession(sessionId: string, meta?: JsonObject): { key: string };
  /** The session's records, in completion order. */
  completions(sessionId: string): CompletionRecord[];
  /** Forgets the session; its key stops working. */
  closeSession(sessionId: string): void;
  /** Stops listening and closes open connections. */
  close(): Promise<void>;
}

const consoleLogger: ProxyLogger = {
  info: (m, f) => console.info(`[proxy] ${m}`, f ?? ""),
  warn: (m, f) => console.warn(`[proxy] ${m}`, f ?? ""),
  error: (m, f) => console.error(`[proxy] ${m}`, f ?? ""),
};

function readBody(req: http.IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        reject(
          new ProxyHttpError(
            413,
            "invalid_request_error",
            "request_too_large",
            `body exceeds ${limit} bytes`,
          ),
        );
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function bearerKey(req: http.IncomingMessage): string | null {
  const header = req.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1]?.trim() ?? null;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

class ProxyServer {
  readonly store: CaptureStore;
  private readonly engine: EngineAdapter;
  private readonly engineUrl: string;
  private readonly timeoutMs: number;

  constructor(
    private readonly opts: ProxyOptions,
    private readonly log: ProxyLogger,
  ) {
    this.store = new CaptureStore(opts.maxRecordsPerSession ?? MAX_RECORDS_PER_SESSION);
    this.engine = engineAdapter(opts.engine);
    this.engineUrl = opts.engineUrl.replace(/\/+$/, "");
    this.timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /** Entry point of every request; nothing thrown here can take the server down. */
  handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    this.route(req, res).catch((err: unknown) => {
      // The harness hung up mid-call: there is nobody left to answer.
      if (err instanceof Error && err.name === "AbortError") {
        res.destroy();
        return;
      }
      if (!(err instanceof ProxyHttpError || err instanceof EngineStatusError)) {
        this.log.warn("request failed", {
          url: req.url,
          error: err instanceof Error ? err.message : String(err),
        });
      }
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const out = toHttpErrorResponse(err);
      res.writeHead(out.status, { "content-type": out.contentType }).end(out.body);
    });
  };

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://proxy").pathname.replace(/\/+$/, "");
    if (path === "/v1/chat/completions") {
      if (req.method !== "POST") {
        throw new ProxyHttpError(
          405,
          "invalid_request_error",
          "method_not_allowed",
          `${req.method} ${path}: use POST`,
        );
      }
      return this.chat(req, res);
    }
    if (path === "/v1/models" && req.method === "GET") {
      sendJson(res, 200, {
        object: "list",
        data: [{ id: this.opts.modelServed, object: "model", created: 0, owned_by: "polar" }],
      });
      return;
    }
    if (path === "/health" && req.method === "GET") {
      sendJson(res, 200, { status: "ok", sessions: this.store.size });
      return;
    }
    sendJson(
      res,
      404,
      openAiError(`no route for ${req.method} ${path || "/"}`, "invalid_request_error", "not_found"),
    );
  }

  private async chat(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const key = bearerKey(req);
    const session = key ? this.store.resolveKey(key) : null;
    if (!session) {
      // Refused, not captured: an unknown key means a misconfigured harness, not a new session.
      throw new ProxyHttpError(
        401,
        "invalid_request_error",
        "invalid_api_key",
        key
          ? "Incorrect API key provided: not a session key of this proxy"
          : "Missing API key: send Authorization: Bearer <session key>",
      );
    }
    const text = await readBody(req, MAX_REQUEST_BODY_BYTES);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new ProxyHttpError(400, "invalid_request_error", "invalid_json", "(body): not valid JSON");
    }
    validateChatRequest(body);
    this.store.reserve(session.sessionId);
    let committed = false;
    try {
      const outcome = await this.serve(session, body, res);
      this.store.commit(session.sessionId, outcome.record);
      committed = true;
      this.reply(res, body, outcome.client);
    } finally {
      if (!committed) this.store.release(session.sessionId);
    }
  }

  /** Calls the engine and builds the record; throws the typed error of whatever went wrong. */
  private async serve(
    session: SessionView,
    original: JsonObject,
    res: http.ServerResponse,
  ): Promise<{ record: CompletionRecord; client: JsonObject }> {
    const served = this.engine.buildChatRequest(original, {
      modelServed: this.opts.modelServed,
      sessionId: session.sessionId,
    });
    // The harness gave up: stop the engine call and record nothing, the agent never saw the answer.
    const clientGone = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) clientGone.abort();
    };
    res.on("close", onClose);
    const started = performance.now();
    const upstream = await postJson(`${this.engineUrl}${this.engine.chatPath}`, served.body, served.headers, {
      timeoutMs: this.timeoutMs,
      signal: clientGone.signal,
    }).finally(() => res.off("close", onClose));
    const latency_ms = performance.now() - started;
    if (upstream.status < 200 || upstream.status >= 300) {
      throw new EngineStatusError(upstream.status, upstream.body, upstream.contentType);
    }
    let raw: unknown;
    try {
      raw = JSON.parse(upstream.body);
    } catch {
      throw new EngineContractError("(body)", "is not valid JSON");
    }
    const n = this.engine.normalizeChatResponse(raw);
    const engineJson = raw as JsonObject;
    const requested = typeof original.model === "string" ? original.model : null;
    const record: CompletionRecord = {
      completion_id: newCompletionId(),
      session_id: session.sessionId,
      timestamp: new Date().toISOString(),
      api_type: "openai_chat",
      engine: this.engine.name,
      model_requested: requested,
      model_used: this.opts.modelServed,
      original_request: original,
      request: served.body,
      response: this.engine.recordableResponse(engineJson),
      prompt_ids: n.prompt_ids,
      response_ids: n.response_ids,
      response_logprobs: n.response_logprobs,
      finish_reason: n.finish_reason,
      weight_version: n.weight_version,
      cached_tokens: n.cached_tokens,
      latency_ms,
      replica: this.engineUrl,
      metadata: { engine_response_id: engineJson.id ?? null, session_meta: session.meta },
    };
    const client = toClientCompletion(engineJson, {
      requestedModel: requested ?? this.opts.modelServed,
      wantLogprobs: original.logprobs === true,
    });
    return { record, client };
  }

  private reply(res: http.ServerResponse, original: JsonObject, client: JsonObject): void {
    if (original.stream !== true) {
      sendJson(res, 200, client);
      return;
    }
    const streamOptions = original.stream_options;
    const includeUsage =
      typeof streamOptions === "object" &&
      streamOptions !== null &&
      (streamOptions as JsonObject).include_usage === true;
    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    for (const data of completionToSseEvents(client, {
      includeUsage,
      wantLogprobs: original.logprobs === true,
    })) {
      res.write(`data: ${data}\n\n`);
    }
    res.end();
  }
}

/**
 * Starts the proxy on `host:port` (default `127.0.0.1:0`).
 *
 * @example
 * ```ts
 * const proxy = await startProxy({ engine: "sglang-openai", engineUrl: "http://127.0.0.1:30000", modelServed: "Qwen/Qwen3-8B" });
 * const { key } = proxy.openSession("sess-1", { task_id: "t1" });
 * // harness: OPENAI_BASE_URL=`${proxy.url}/v1` OPENAI_API_KEY=key
 * const records = proxy.completions("sess-1");
 * proxy.closeSession("sess-1");
 * await proxy.close();
 * ```
 */
export async function startProxy(opts: ProxyOptions): Promise<RecordingProxy> {
  const server = new ProxyServer(opts, opts.logger ?? consoleLogger);
  const httpServer = http.createServer(server.handle);
  // Generations can take minutes; the engine timeout is the one that counts, not Node's defaults.
  httpServer.requestTimeout = 0;
  httpServer.headersTimeout = 60_000;
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
  return {
    url: `http://${urlHost}:${port}`,
    openSession: (sessionId, meta) => server.store.open(sessionId, meta ?? {}),
    completions: (sessionId) => server.store.records(sessionId),
    closeSession: (sessionId) => server.store.close(sessionId),
    close: () =>
      new Promise<void>((resolve) => {
        httpServer.close(() => resolve());
        httpServer.closeAllConnections();
      }),
  };
}
