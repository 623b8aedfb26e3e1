/**
 * One JSON POST to the engine over node:http(s). Not `fetch`: its default 300 s header timeout would
 * cut long generations before the proxy's own (longer, explicit) request timeout.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";
import { type SseSource, sseData } from "./engine-sse";
import { clientAbortError, EngineTimeoutError, EngineUnreachableError } from "./errors";

/** Largest engine response body the proxy reads (bytes); a bigger one is treated as a broken engine. */
export const MAX_ENGINE_RESPONSE_BYTES = 256 * 1024 * 1024;

/** A raw engine answer. */
export interface UpstreamResponse {
  status: number;
  contentType: string | null;
  body: string;
}

/** How long the engine may take, and the harness's abort. */
interface PostOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

/**
 * One POST in flight, with its deadline and abort watch. The first failure wins: it cuts the
 * request and rejects the caller's promise unless that was settled already. A stream settles
 * early (on its headers) and keeps the watch until its body is read, so a deadline or an abort
 * mid-stream still ends it.
 */
class EnginePost implements SseSource {
  failure: Error | null = null;
  readonly req: http.ClientRequest;
  private settled = false;
  private readonly timer: NodeJS.Timeout;
  private readonly onAbort = () => this.fail(clientAbortError());

  constructor(
    readonly url: string,
    body: unknown,
    headers: Record<string, string>,
    private readonly opts: PostOptions,
    private readonly reject: (err: Error) => void,
    onResponse: (res: http.IncomingMessage) => void,
  ) {
    const target = new URL(url);
    const payload = Buffer.from(JSON.stringify(body));
    const client = target.protocol === "https:" ? https : http;
    this.timer = setTimeout(() => this.fail(new EngineTimeoutError(url, opts.timeoutMs)), opts.timeoutMs);
    opts.signal?.addEventListener("abort", this.onAbort, { once: true });
    this.req = client.request(
      target,
      { method: "POST", headers: { ...headers, "content-length": String(payload.length) } },
      onResponse,
    );
    this.req.on("error", (err) => this.fail(new EngineUnreachableError(url, err.message)));
    this.req.end(payload);
  }

  fail(err: Error): void {
    this.failure ??= err;
    this.req.destroy(err);
    if (this.settled) return;
    this.settled = true;
    this.stopWatching();
    this.reject(this.failure);
  }

  /** Settles the caller's promise (once); `watching` keeps the deadline and abort watch on. */
  settle(resolve: () => void, watching = false): void {
    if (this.settled) return;
    this.settled = true;
    if (!watching) this.stopWatching();
    resolve();
  }

  broken(reason: string): void {
    this.failure ??= new EngineUnreachableError(this.url, reason);
  }

  close(): void {
    this.stopWatching();
    this.req.destroy();
  }

  private stopWatching(): void {
    clearTimeout(this.timer);
    this.opts.signal?.removeEventListener("abort", this.onAbort);
  }
}

/** Reads a whole response body; past `limit.bytes` its `exceeded` is called and the rest dropped. */
function readWhole(
  res: http.IncomingMessage,
  done: (r: UpstreamResponse) => void,
  limit?: { bytes: number; exceeded: () => void },
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (limit && size > limit.bytes) {
      limit.exceeded();
      return;
    }
    chunks.push(chunk);
  });
  res.on("end", () =>
    done({
      status: res.statusCode ?? 0,
      contentType: res.headers["content-type"] ?? null,
      body: Buffer.concat(chunks).toString("utf8"),
    }),
  );
}

/**
 * POSTs `body` as JSON and reads the whole answer. Throws {@link EngineUnreachableError} when the
 * engine cannot be reached and {@link EngineTimeoutError} after `timeoutMs`; `signal` aborts quietly
 * (the harness went away) with an `AbortError`.
 *
 * @example
 * ```ts
 * const r = await postJson("http://127.0.0.1:30000/v1/chat/completions", body, {}, { timeoutMs: 900_000 });
 * ```
 */
export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  opts: PostOptions,
): Promise<UpstreamResponse> {
  return new Promise<UpstreamResponse>((resolve, reject) => {
    const post: EnginePost = new EnginePost(url, body, headers, opts, reject, (res) => {
      readWhole(res, (r) => post.settle(() => resolve(r)), {
        bytes: MAX_ENGINE_RESPONSE_BYTES,
        exceeded: () =>
          post.fail(
            new EngineUnreachableError(url, `response larger than ${MAX_ENGINE_RESPONSE_BYTES} bytes`),
          ),
      });
      res.on("error", (err) => post.fail(new EngineUnreachableError(url, err.message)));
    });
  });
}

/** A streamed engine answer: an error body, or the `data:` payloads of its SSE events. */
export type UpstreamStream =
  | { ok: false; status: number; contentType: string | null; body: string }
  | { ok: true; events: AsyncGenerator<string, void, undefined>; cancel(): void };

/**
 * POSTs `body` and, on 2xx, yields the `data:` payloads of the SSE answer as they arrive; a non-2xx
 * answer is read whole. Errors while reading become {@link EngineUnreachableError} /
 * {@link EngineTimeoutError} (after `timeoutMs` from the start) / `AbortError` (on `signal`).
 *
 * @example
 * ```ts
 * const s = await postStream(url, { ...body, stream: true }, headers, { timeoutMs: 900_000 });
 * if (s.ok) for await (const data of s.events) if (data !== "[DONE]") handle(JSON.parse(data));
 * ```
 */
export function postStream(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  opts: PostOptions,
): Promise<UpstreamStream> {
  const sseHeaders = { ...headers, accept: "text/event-stream" };
  return new Promise<UpstreamStream>((resolve, reject) => {
    const post: EnginePost = new EnginePost(url, body, sseHeaders, opts, reject, (res) => {
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) {
        readWhole(res, (r) => post.settle(() => resolve({ ok: false, ...r })));
        return;
      }
      const stream = () =>
        resolve({ ok: true, events: sseData(res, post), cancel: () => post.req.destroy() });
      post.settle(stream, true);
    });
  });
}
